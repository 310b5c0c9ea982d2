package supervise

import "time"

// budget counts crashes per (model, config) and across the pool within
// sliding windows. It is guarded by Pool.mu.
//
// A (model, config) is quarantined after QuarantineCrashes crashes within
// the window with no request served in between: a model that keeps
// crashing. A request that the model serves forgets its crashes, so that
// isolating one poisonous input — which crashes a worker several times
// while the healthy rest of its batch succeeds — never quarantines a
// healthy model. The pool-wide count (degraded) is not reset by successes.
type budget struct {
	perModel    int
	modelWindow time.Duration
	perPool     int
	poolWindow  time.Duration

	byModel     map[ModelKey][]time.Time
	all         []time.Time
	quarantined map[ModelKey]*QuarantinedError
}

func newBudget(c Config) *budget {
	return &budget{
		perModel: c.QuarantineCrashes, modelWindow: c.QuarantineWindow,
		perPool: c.DegradedCrashes, poolWindow: c.DegradedWindow,
		byModel:     make(map[ModelKey][]time.Time),
		quarantined: make(map[ModelKey]*QuarantinedError),
	}
}

// within drops the times older than window before now.
func within(ts []time.Time, now time.Time, window time.Duration) []time.Time {
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= window {
		i++
	}
	return ts[i:]
}

// record counts a crash at now, against model if hasModel. It returns the
// quarantine error if this crash quarantined the model.
func (b *budget) record(model ModelKey, hasModel bool, now time.Time, ce *CrashError) *QuarantinedError {
	b.all = append(within(b.all, now, b.poolWindow), now)
	if !hasModel {
		return nil
	}
	ts := append(within(b.byModel[model], now, b.modelWindow), now)
	b.byModel[model] = ts
	if len(ts) < b.perModel || b.quarantined[model] != nil {
		return nil
	}
	q := &QuarantinedError{Model: model, Crashes: len(ts), Since: now, Last: ce}
	b.quarantined[model] = q
	return q
}

// served records a request the model answered: its crash streak ends.
func (b *budget) served(model ModelKey) {
	if b.quarantined[model] == nil {
		delete(b.byModel, model)
	}
}

// quarantine returns the model's quarantine, or nil.
func (b *budget) quarantine(model ModelKey) *QuarantinedError { return b.quarantined[model] }

// lift ends a quarantine and forgets the model's crashes.
func (b *budget) lift(model ModelKey) {
	delete(b.quarantined, model)
	delete(b.byModel, model)
}

// degraded reports whether the pool crashed perPool times within its window
// before now, and how many crashes the window holds.
func (b *budget) degraded(now time.Time) (bool, int) {
	b.all = within(b.all, now, b.poolWindow)
	return len(b.all) >= b.perPool, len(b.all)
}

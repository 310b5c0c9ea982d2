package pgstore

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// urlParams are the parameters an output URL may carry: synapse's table,
// and libpq's connection parameters (PostgreSQL 17's list) that pgx
// honours. Any other would reach the server as a run-time setting, or be
// dropped, so it is refused by name: a typo (?tabel=) is not written to
// chunks.
var urlParams = []string{
	"table",
	"application_name", "channel_binding", "client_encoding", "connect_timeout", "dbname", "fallback_application_name",
	"gssencmode", "gsslib", "host", "hostaddr", "keepalives", "keepalives_count", "keepalives_idle", "keepalives_interval",
	"krbsrvname", "load_balance_hosts", "options", "passfile", "password", "port", "replication", "requirepeer",
	"service", "servicefile", "ssl_max_protocol_version", "ssl_min_protocol_version", "sslcert", "sslcertmode",
	"sslcompression", "sslcrl", "sslcrldir", "sslkey", "sslmode", "sslnegotiation", "sslpassword", "sslrootcert",
	"sslsni", "target_session_attrs", "tcp_user_timeout", "user",
}

// checkParams refuses an output URL's parameter given twice (?table=a&table=b
// would write a) or unknown.
func checkParams(q url.Values, shown string) error {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch {
		case len(q[k]) > 1:
			return fmt.Errorf("%w: %s: the parameter %s is given %d times: give it once", ErrRefused, shown, k, len(q[k]))
		case !slices.Contains(urlParams, k):
			return fmt.Errorf("%w: %s: unknown parameter %q: an output URL takes table= and libpq's connection parameters (%s)",
				ErrRefused, shown, k, strings.Join(urlParams[1:], ", "))
		}
	}
	return nil
}

// reserved says why synapse keeps the table name for itself: its state
// table, and every name it derives from an output's (T_synapse_staging,
// T_synapse_keep, T_synapse_shard_I_of_N), which a later run would drop.
func reserved(table string) string {
	switch {
	case table == StateTable:
		return "it is synapse's state table"
	case strings.Contains(table, "_synapse_") || strings.HasSuffix(table, "_synapse"):
		return "names with _synapse_ are synapse's own tables (T_synapse_staging, T_synapse_keep, T_synapse_shard_I_of_N), which a run into T drops"
	}
	return ""
}

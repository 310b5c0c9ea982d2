//go:build !unix

package modelcache

import "errors"

// flock is unavailable: the store's concurrency control uses flock(2).
func flock(string, bool) (func(), error) {
	return nil, errors.New("modelcache: the model cache needs flock(2) (a Unix system)")
}

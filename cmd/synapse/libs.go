package main

import (
	"github.com/synapse-embed/synapse/internal/libpath"
)

// findLib finds a native library in libpath's search order; flag is the
// value of the library's flag (which the CLI also fills from its
// environment variable). It is called before any worker is spawned, so
// that a missing library is reported as such, with the places searched and
// how to get it, instead of as workers that die at start.
func findLib(lib libpath.Lib, flag string) (libpath.Place, error) {
	return lib.Find(libpath.ProcessEnv(flag))
}

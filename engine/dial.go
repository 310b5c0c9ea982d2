package engine

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// ErrUntrustedModule: the listener a worker dialled is not its module (see
// DialModule). The worker sends nothing over such a connection.
var ErrUntrustedModule = errors.New("the socket's listener is not this worker's module")

// DialModule connects to the module's listening socket at path and checks
// who listens before anything is sent: the nonce in HELLO authenticates the
// worker to the module, and this check authenticates the module to the
// worker. On Linux the listener's credentials (SO_PEERCRED) must name this
// worker's user and its parent process, the module that spawned it; a
// socket planted at the path by anyone else is refused (ErrUntrustedModule).
// Elsewhere only the user is checked where the system reports it.
func DialModule(path string) (*net.UnixConn, error) {
	nc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := checkModulePeer(nc, os.Getuid(), os.Getppid()); err != nil {
		nc.Close()
		return nil, fmt.Errorf("engine: %s: %w", path, err)
	}
	return nc, nil
}

package redistest

import (
	"fmt"
	"net"
	"sync"
)

// handedOut holds every port this test binary has given a server, so two
// servers started at the same moment never get the same one. A port stays
// reserved for the life of the binary: servers restart on their own port.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// freePort returns a loopback TCP port that was free a moment ago: the kernel
// picks it for a listener on 127.0.0.1:0, which is then closed. Someone else
// may still take it before redis-server binds it; callers retry on errAddrInUse.
func freePort() (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()

		handedOut.Lock()
		taken := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free port: kernel kept offering ports already in use")
}

//go:build windows

package server

import "syscall"

// smallReceiveBuffer makes a socket's receive buffer tiny, so that a peer that stops
// reading fills it at once.
func smallReceiveBuffer(fd uintptr) {
	syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
}

//go:build !linux

package files_test

func closeOnExec() {} // only Linux's tests start a daemon (see caseInsensitiveDir)

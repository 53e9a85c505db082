//go:build windows

package handlers_test

import "errors"

func mkfifo(string) error { return errors.New("Windows has no fifos in the file namespace") }

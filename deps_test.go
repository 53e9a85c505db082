package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The server binary links neither the Anthropic SDK (memorytool's) nor the official MCP
// client (memorytest's), and the command layer links no database driver.
func TestBinaryDependencies(t *testing.T) {
	list := func(pkgs ...string) string {
		out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		return string(out)
	}
	bin := list(".")
	for _, mod := range []string{"github.com/anthropics/anthropic-sdk-go", "github.com/modelcontextprotocol/go-sdk"} {
		if strings.Contains(bin, mod) {
			t.Errorf("the binary links %s", mod)
		}
	}
	if strings.Contains(list("./handlers", "./vfs"), "github.com/jackc/") {
		t.Error("handlers or vfs link a database driver")
	}
}

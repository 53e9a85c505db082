package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The container image: built by packaging/image/build.sh with ko (no Docker engine) on a base
// it makes itself, pushed to a throwaway local registry. Its config runs the static binary as
// the non-root user with memory in /data and the MCP registry's label; the binary taken from
// its layer serves the whole scenario over stdio, the image's default.
func TestContainerImage(t *testing.T) {
	needTool(t, "ko", "go install github.com/google/ko@v0.18.0")
	crane := needTool(t, "crane", "go install github.com/google/go-containerregistry/cmd/crane@v0.20.6")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	reg := exec.Command(crane, "registry", "serve", "--address", addr)
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Process.Kill(); reg.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the local registry did not start")
		}
	}

	tarball := filepath.Join(t.TempDir(), "image.tar")
	build := exec.Command("packaging/image/build.sh", "v3.2.1", addr+"/memory-mcp-base:test", tarball)
	build.Env = append(os.Environ(), "PLATFORMS=linux/amd64", "CRANE_FLAGS=--insecure", "KO_FLAGS=--insecure-registry")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, out)
	}

	files := untar(t, tarball)
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	var config struct {
		Architecture, OS string
		Config           struct {
			Entrypoint, Env []string
			User            string
			Labels          map[string]string
		}
	}
	if err := json.Unmarshal(files[manifest[0].Config], &config); err != nil {
		t.Fatal(err)
	}
	c := config.Config
	if !slices.Equal(c.Entrypoint, []string{"/ko-app/memory-mcp"}) || c.User != "65532" || !slices.Contains(c.Env, "MEMORY_MCP_ROOT=/data") ||
		c.Labels["io.modelcontextprotocol.server.name"] != "io.github.memory-mcp/memory-mcp" || config.OS != "linux" ||
		!slices.Contains(manifest[0].RepoTags, "ghcr.io/memory-mcp/memory-mcp:3.2.1") {
		t.Errorf("image config: %+v, tags %v", config, manifest[0].RepoTags)
	}

	// The layers: /data, empty, 0700, owned by the user; the binary.
	var binary []byte
	dataOK := false
	for _, layer := range manifest[0].Layers {
		zr, err := gzip.NewReader(strings.NewReader(string(files[layer])))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch strings.TrimPrefix(h.Name, "/") {
			case "data", "data/":
				dataOK = h.Typeflag == tar.TypeDir && h.Uid == 65532 && h.Mode&0o777 == 0o700
			case "ko-app/memory-mcp":
				binary, _ = io.ReadAll(tr)
			}
		}
	}
	if !dataOK {
		t.Error("the image has no /data directory owned by 65532 with mode 0700")
	}
	if len(binary) == 0 {
		t.Fatal("no /ko-app/memory-mcp in the image")
	}
	exe := filepath.Join(t.TempDir(), "memory-mcp")
	os.WriteFile(exe, binary, 0o755)
	if out, err := exec.Command(exe, "-version").Output(); err != nil || !strings.HasPrefix(string(out), "memory-mcp v3.2.1 ") || !strings.Contains(string(out), "encoding/json v2") {
		t.Errorf("-version: %q %v", out, err)
	}
	cmd := exec.Command(exe) // the image's default: stdio, memory in MEMORY_MCP_ROOT
	data := t.TempDir()
	cmd.Env = append(testEnv(t), "MEMORY_MCP_ROOT="+data)
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
	runScenario(t, cs, false)
	if entries, _ := os.ReadDir(data); len(entries) == 0 {
		t.Errorf("nothing was written to MEMORY_MCP_ROOT")
	}
}

// untar reads a tar file into memory, by name.
func untar(t *testing.T, name string) map[string][]byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(fmt.Errorf("%s: %w", name, err))
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = data
	}
}

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// needTool finds a command-line tool the packaging tests need: where it is missing they
// skip, naming it, except in CI (CI=true), where .ci/run installs it and a skip would hide
// a failure.
func needTool(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed (%s); CI must run this test", name, install)
	}
	t.Skipf("%s is not installed (%s)", name, install)
	return ""
}

// The Claude Desktop bundle: the manifest passes mcpb validate; the Linux bundle, built by
// packaging/mcpb/build.sh and unpacked, starts exactly as its mcp_config says (user_config
// substituted, as Claude Desktop does) and serves a client the whole scenario.
func TestClaudeDesktopBundle(t *testing.T) {
	needTool(t, "mcpb", "npm install @anthropic-ai/mcpb")
	needTool(t, "node", "Node.js")
	if out, err := exec.Command("mcpb", "validate", "packaging/mcpb/manifest.json").CombinedOutput(); err != nil {
		t.Fatalf("mcpb validate: %v\n%s", err, out)
	}
	out := t.TempDir()
	build := exec.Command("packaging/mcpb/build.sh", "v9.8.7", out, runtime.GOOS+"/"+runtime.GOARCH)
	if data, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, data)
	}
	bundle := filepath.Join(out, fmt.Sprintf("memory-mcp-9.8.7-%s-%s.mcpb", runtime.GOOS, runtime.GOARCH))
	dir := filepath.Join(t.TempDir(), "unpacked")
	if data, err := exec.Command("mcpb", "unpack", bundle, dir).CombinedOutput(); err != nil {
		t.Fatalf("mcpb unpack: %v\n%s", err, data)
	}

	var m struct {
		Version string
		Server  struct {
			MCPConfig struct {
				Command string
				Args    []string
			} `json:"mcp_config"`
		}
		UserConfig map[string]struct{ Default any } `json:"user_config"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != "9.8.7" {
		t.Errorf("bundle version %q", m.Version)
	}
	home := t.TempDir()
	memories := filepath.Join(home, "My Memories")
	values := map[string]string{"__dirname": dir, "HOME": home, "user_config.memory_dir": memories}
	for k, v := range m.UserConfig {
		if _, set := values["user_config."+k]; !set {
			raw, _ := json.Marshal(v.Default) // a number as JSON writes it: 1048576, not 1.048576e+06
			values["user_config."+k] = strings.Trim(string(raw), `"`)
		}
	}
	subst := func(s string) string {
		return regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllStringFunc(s, func(v string) string {
			key := v[2 : len(v)-1]
			if val, ok := values[key]; ok {
				return val
			}
			t.Fatalf("the manifest uses %s, which Claude Desktop does not provide", v)
			return ""
		})
	}
	command := subst(m.Server.MCPConfig.Command)
	var args []string
	for _, a := range m.Server.MCPConfig.Args {
		args = append(args, subst(a))
	}
	cmd := exec.Command(command, args...)
	cmd.Env = testEnv(t)
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, "")
	runScenario(t, cs, false)
	if _, err := os.Stat(memories); err != nil {
		t.Errorf("the memory directory from user_config was not used: %v", err)
	}
	if v, _ := exec.Command(command, "-version").Output(); !strings.HasPrefix(string(v), "memory-mcp v9.8.7 ") || !strings.Contains(string(v), "encoding/json v2") {
		t.Errorf("the bundled binary's version: %q", v)
	}
	checkRegistryServerJSON(t, out, bundle)
}

// checkRegistryServerJSON fills the MCP registry's server.json for the bundles in dir and
// checks it against the registry's documented rules: a reverse-DNS name in the io.github
// namespace, the required fields, an OCI image tagged with the version, the Go module at
// v-version, and each MCPB package with a URL containing "mcp" and its file's SHA-256.
func checkRegistryServerJSON(t *testing.T, dir, bundle string) {
	data, err := exec.Command("packaging/registry/fill.sh", "v9.8.7", dir).Output()
	if err != nil {
		t.Fatalf("fill.sh: %v", err)
	}
	var s struct {
		Schema      string `json:"$schema"`
		Name        string
		Description string
		Version     string
		Repository  struct{ URL, Source string }
		Packages    []struct {
			RegistryType string
			Identifier   string
			Version      string
			FileSha256   string
			Transport    struct{ Type string }
		}
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Schema, "https://static.modelcontextprotocol.io/schemas/") || !regexp.MustCompile(`^io\.github\.[A-Za-z0-9-]+/[A-Za-z0-9._-]+$`).MatchString(s.Name) ||
		s.Description == "" || len(s.Description) > 100 || s.Version != "9.8.7" || s.Repository.URL == "" || s.Repository.Source != "github" {
		t.Errorf("server.json header: %+v", s)
	}
	sum := sha256.Sum256(mustRead(t, bundle))
	kinds := map[string]bool{}
	for _, p := range s.Packages {
		kinds[p.RegistryType] = true
		if p.Transport.Type != "stdio" {
			t.Errorf("%s: transport %q", p.RegistryType, p.Transport.Type)
		}
		switch p.RegistryType {
		case "oci":
			if p.Identifier != "ghcr.io/memory-mcp/memory-mcp:9.8.7" {
				t.Errorf("oci identifier %q", p.Identifier)
			}
		case "go":
			if p.Identifier != "github.com/memory-mcp/memory-mcp" || p.Version != "v9.8.7" {
				t.Errorf("go package %+v", p)
			}
		case "mcpb":
			if !strings.Contains(p.Identifier, "mcp") || !strings.HasSuffix(p.Identifier, "/v9.8.7/"+filepath.Base(bundle)) || p.FileSha256 != hex.EncodeToString(sum[:]) {
				t.Errorf("mcpb package %+v", p)
			}
		default:
			t.Errorf("unknown registry type %q", p.RegistryType)
		}
	}
	if !kinds["oci"] || !kinds["go"] || !kinds["mcpb"] {
		t.Errorf("packages: %v", kinds)
	}
}

func mustRead(t *testing.T, name string) []byte {
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Every go install the packaging scripts and the README tell a person to run installs one
// module's package: go install refuses several modules at versions in one command.
func TestInstallHintsWork(t *testing.T) {
	files := []string{"README.md", "packaging/image/build.sh", "packaging/mcpb/build.sh", "packaging/registry/fill.sh", ".ci/run"}
	hint := regexp.MustCompile(`go install ((?:[\w./-]+@[\w.+-]+\s*)+)`)
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// A hint in a shell comment may run over several lines: read them as one.
		text := regexp.MustCompile(`\n[ \t]*#[ \t]*`).ReplaceAllString(string(data), " ")
		for _, m := range hint.FindAllStringSubmatch(text, -1) {
			seen++
			if n := len(strings.Fields(m[1])); n != 1 {
				t.Errorf("%s: %q installs %d modules at once, which go install refuses", f, strings.TrimSpace(m[0]), n)
			}
		}
	}
	if seen < 3 {
		t.Errorf("found %d go install hints; the test reads the wrong files", seen)
	}
}

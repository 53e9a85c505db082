package vfstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A throwaway PostgreSQL cluster for the tests of a test binary: Debian's server, started on
// first use on a free loopback port with trust authentication, as the postgres user when the
// tests run as root (initdb refuses root). MEMORY_MCP_TEST_DSN, when set, is used instead.
var cluster struct {
	once sync.Once
	dsn  string
	dir  string
	bin  string
	err  error
	skip string
}

// PostgresDSN returns the DSN of the test cluster, starting it if needed. Where PostgreSQL is
// not installed the test is skipped, naming it; with CI=true it fails instead.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	cluster.once.Do(startCluster)
	switch {
	case cluster.skip != "" && os.Getenv("CI") == "true":
		t.Fatalf("%s; CI must run this test", cluster.skip)
	case cluster.skip != "":
		t.Skip(cluster.skip)
	case cluster.err != nil:
		t.Fatalf("starting the test PostgreSQL: %v", cluster.err)
	}
	return cluster.dsn
}

// StopPostgres stops the test cluster, if one was started; a TestMain calls it.
func StopPostgres() {
	if cluster.dir == "" {
		return
	}
	asPostgres(filepath.Join(cluster.bin, "pg_ctl"), "-D", filepath.Join(cluster.dir, "data"), "-m", "immediate", "-w", "stop").Run()
	os.RemoveAll(cluster.dir)
}

func startCluster() {
	if dsn := os.Getenv("MEMORY_MCP_TEST_DSN"); dsn != "" {
		cluster.dsn = dsn
		return
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		cluster.skip = "PostgreSQL is not installed (apt-get install postgresql, or set MEMORY_MCP_TEST_DSN)"
		return
	}
	cluster.bin = filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "memory-mcp-pg-")
	if err != nil {
		cluster.err = err
		return
	}
	cluster.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			cluster.err = fmt.Errorf("running as root needs the postgres user: %w", err)
			return
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			cluster.err = err
			return
		}
	}
	port, err := freePort()
	if err != nil {
		cluster.err = err
		return
	}
	data := filepath.Join(dir, "data")
	if out, err := asPostgres(filepath.Join(cluster.bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8").CombinedOutput(); err != nil {
		cluster.err = fmt.Errorf("initdb: %v\n%s", err, out)
		return
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=200", port, dir)
	if out, err := asPostgres(filepath.Join(cluster.bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "-o", opts, "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		cluster.err = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
		return
	}
	cluster.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

// asPostgres runs a PostgreSQL program, as the postgres user when this process is root.
func asPostgres(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// UniqueName returns a store name no other test of this run uses.
func UniqueName(t testing.TB) string {
	return fmt.Sprintf("t%d-%s", time.Now().UnixNano(), filepath.Base(t.Name()))
}

package vfstest

import (
	"context"
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

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/postgres"
)

// A throwaway PostgreSQL cluster for the tests of a test binary: Debian's server, started on
// first use on a free loopback port with trust authentication, as the postgres user when the
// tests run as root (initdb refuses root). MEMORY_MCP_TEST_DSN, when set, is used instead.
var cluster struct {
	once sync.Once
	c    *Cluster
	dsn  string
	err  error
	skip string
}

// PostgresDSN returns the DSN of the test cluster, starting it if needed. Where PostgreSQL is
// not installed the test is skipped, naming it; with CI=true it fails instead.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	cluster.once.Do(func() {
		if cluster.dsn = os.Getenv("MEMORY_MCP_TEST_DSN"); cluster.dsn != "" {
			return
		}
		cluster.c, cluster.skip, cluster.err = startCluster()
		if cluster.c != nil {
			cluster.dsn = cluster.c.DSN
		}
	})
	mustRun(t, cluster.skip, cluster.err)
	return cluster.dsn
}

func mustRun(t testing.TB, skip string, err error) {
	t.Helper()
	switch {
	case skip != "" && os.Getenv("CI") == "true":
		t.Fatalf("%s; CI must run this test", skip)
	case skip != "":
		t.Skip(skip)
	case err != nil:
		t.Fatalf("starting the test PostgreSQL: %v", err)
	}
}

// StopPostgres stops the test cluster, if one was started; a TestMain calls it.
func StopPostgres() {
	if cluster.c != nil {
		cluster.c.stop("immediate")
		os.RemoveAll(cluster.c.dir)
	}
}

// Cluster is a PostgreSQL server of its own, for a test that stops and restarts it.
type Cluster struct {
	DSN  string
	dir  string // the cluster's directory: data, log and socket
	bin  string
	opts string // the server's options
}

// NewPostgresCluster starts a PostgreSQL server for t alone (never MEMORY_MCP_TEST_DSN's,
// which other tests share); it is stopped and removed when t ends. Where PostgreSQL is not
// installed the test is skipped, naming it; with CI=true it fails instead.
func NewPostgresCluster(t testing.TB) *Cluster {
	t.Helper()
	c, skip, err := startCluster()
	if c != nil {
		t.Cleanup(func() {
			c.stop("immediate")
			os.RemoveAll(c.dir)
		})
	}
	mustRun(t, skip, err)
	return c
}

// Restart restarts the server: mode "fast" ends the connections cleanly, "immediate" kills
// the server without a shutdown checkpoint (as a crash does; it recovers from its log).
func (c *Cluster) Restart(t testing.TB, mode string) {
	t.Helper()
	if out, err := c.pgctl("-m", mode, "-w", "-t", "60", "-o", c.opts, "restart").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		t.Fatalf("pg_ctl restart -m %s: %v\n%s\n%s", mode, err, out, log)
	}
}

// Stop stops the server (mode as for Restart); Start starts it again.
func (c *Cluster) Stop(t testing.TB, mode string) {
	t.Helper()
	if out, err := c.stop(mode); err != nil {
		t.Fatalf("pg_ctl stop -m %s: %v\n%s", mode, err, out)
	}
}

// Start starts the stopped server.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
}

func (c *Cluster) pgctl(args ...string) *exec.Cmd {
	return asPostgres(filepath.Join(c.bin, "pg_ctl"), append([]string{"-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "log")}, args...)...)
}

func (c *Cluster) stop(mode string) ([]byte, error) {
	return c.pgctl("-m", mode, "-w", "stop").CombinedOutput()
}

func (c *Cluster) start() error {
	if out, err := c.pgctl("-w", "-t", "60", "-o", c.opts, "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return nil
}

// startCluster creates and starts a cluster; it says why not (skip) when PostgreSQL is not
// installed.
func startCluster() (c *Cluster, skip string, err error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		return nil, "PostgreSQL is not installed (apt-get install postgresql, or set MEMORY_MCP_TEST_DSN)", nil
	}
	dir, err := os.MkdirTemp("", "memory-mcp-pg-")
	if err != nil {
		return nil, "", err
	}
	c = &Cluster{dir: dir, bin: filepath.Dir(bins[len(bins)-1])}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return c, "", fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return c, "", err
		}
	}
	port, err := freePort()
	if err != nil {
		return c, "", err
	}
	data := filepath.Join(dir, "data")
	if out, err := asPostgres(filepath.Join(c.bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8").CombinedOutput(); err != nil {
		return c, "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// fsync off: the tests kill the server, never the machine, and the operating system
	// keeps what was written.
	c.opts = fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=300", port, dir)
	if err := c.start(); err != nil {
		return c, "", err
	}
	c.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return c, "", nil
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

// PostgresStorage opens a fresh store (a name no other test uses) in the test cluster, over
// a database connection of the test's own that is closed when the test ends.
func PostgresStorage(t testing.TB, opts ...vfs.Option) *postgres.Storage {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, PostgresDSN(t), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	st, err := db.Storage(ctx, UniqueName(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// UniqueName returns a store name no other test of this run uses.
func UniqueName(t testing.TB) string {
	return fmt.Sprintf("t%d-%s", time.Now().UnixNano(), filepath.Base(t.Name()))
}

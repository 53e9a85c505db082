package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// A database whose disk is full refuses a change as a full disk does: the model is told
// there is no space left on storage, the change leaves nothing, and what was written before
// stays readable. The database lives in a tablespace on a 10 MiB tmpfs, while the server's
// own log has room, as when a data volume fills up.
func TestPostgresDiskFull(t *testing.T) {
	var sudo []string
	if os.Geteuid() != 0 {
		if exec.Command("sudo", "-n", "true").Run() != nil {
			skip(t, "mounting a tmpfs needs root, or sudo without a password")
		}
		sudo = []string{"sudo", "-n"}
	}
	owner := os.Getuid() // the server runs as the postgres user under root (see vfstest)
	if owner == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Sscan(u.Uid, &owner)
	}
	mnt := t.TempDir()
	if err := os.Chmod(mnt+"/..", 0o755); err != nil { // for the server to reach it
		t.Fatal(err)
	}
	mount := append(sudo, "mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=10m,mode=0700,uid=%d", owner), "tmpfs", mnt)
	if out, err := exec.Command(mount[0], mount[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() {
		umount := append(sudo, "umount", mnt)
		if out, err := exec.Command(umount[0], umount[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%v: %s", err, out)
		}
	})
	c := vfstest.NewPostgresCluster(t) // stopped before the tmpfs goes (cleanups run last first)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"CREATE TABLESPACE small LOCATION '" + mnt + "'", "CREATE DATABASE memory TABLESPACE small"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	h := openMemory(t, strings.Replace(c.DSN, "/postgres?", "/memory?", 1), "default", true)
	var created []string
	for i := range 40 {
		p := fmt.Sprintf("/memories/f%d.md", i)
		res := h.Create(ctx, handlers.CreateArgs{Path: p, FileText: randomText(512 << 10)})
		if !res.IsError {
			created = append(created, p)
			continue
		}
		if want := "Error: Could not create " + p + ": no space left on storage"; res.Text != want {
			t.Fatalf("got %q, want %q", res.Text, want)
		}
		if res := h.View(ctx, handlers.ViewArgs{Path: p}); !strings.Contains(res.Text, "does not exist") {
			t.Errorf("the refused create left %s: %s", p, res.Text)
		}
		break
	}
	if len(created) == 0 || len(created) == 40 {
		t.Fatalf("%d creates of 512 KiB succeeded on a 10 MiB disk", len(created))
	}
	for _, p := range created {
		if res := h.View(ctx, handlers.ViewArgs{Path: p, ViewRange: []int{1, 1}}); res.IsError {
			t.Errorf("view %s: %s", p, res.Text)
		}
	}
}

// randomText returns n characters that do not compress.
func randomText(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(rand.Text())
	}
	return b.String()[:n]
}

// skip skips the test, naming what it needs; with CI=true it fails instead.
func skip(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; CI must run this test", why)
	}
	t.Skip(why)
}

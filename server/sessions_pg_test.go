package server

import (
	"context"
	"testing"
	"time"

	"github.com/memory-mcp/memory-mcp/vfs/postgres"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// Two replicas' session tables on one PostgreSQL database: a session started on either is
// served by both, for its tenant only; one ended on either (deleted, idle, evicted) is
// ended on both. While the database is down, a signed id is taken on trust and a session
// started meanwhile is recorded once it is back.
func TestSessionsAcrossReplicas(t *testing.T) {
	pg := vfstest.NewPostgresCluster(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, pg.DSN, true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, err := db.Sessions().Key(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := db.Sessions().Key(ctx); string(again) != string(key) || len(key) != 32 {
		t.Fatal("the session key is not the same for every replica")
	}
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	limits := SessionLimits{Idle: 30 * time.Minute, Max: 5, MaxPerTenant: 2, Key: key, Store: db.Sessions()}
	a, b := newSessionTable(limits, clock), newSessionTable(limits, clock)
	var endedA []string
	a.end = func(id string) { endedA = append(endedA, id) }

	id := a.issue("alice")
	if err := b.check(id, "alice"); err != nil {
		t.Fatalf("replica b refuses a's session: %v", err)
	}
	if b.check(id, "bob") == nil {
		t.Error("bob uses alice's session")
	}
	b.remove(id) // the client's DELETE, on b
	if a.check(id, "alice") == nil {
		t.Error("a serves a session ended on b")
	}

	// Idle: a session used on a within the limit lives; past it, it ends on both.
	id = a.issue("alice")
	now = now.Add(20 * time.Minute)
	if err := b.check(id, "alice"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(20 * time.Minute) // 20 minutes after its last use
	if err := a.check(id, "alice"); err != nil {
		t.Fatalf("a session used 20 minutes ago ended: %v", err)
	}
	now = now.Add(31 * time.Minute)
	if b.check(id, "alice") == nil || a.check(id, "alice") == nil {
		t.Error("an idle session lives on")
	}
	stale := b.issue("carol")
	now = now.Add(31 * time.Minute)
	a.sweep()
	if b.check(stale, "carol") == nil {
		t.Error("a session swept on a lives on b")
	}

	// Eviction: alice's third session ends her least recently used one, on both replicas.
	first := a.issue("alice")
	now = now.Add(time.Minute)
	second := b.issue("alice")
	now = now.Add(time.Minute)
	endedA = nil
	a.issue("alice")
	if len(endedA) != 1 || endedA[0] != first {
		t.Errorf("evicted %v, want alice's oldest session", endedA)
	}
	if b.check(first, "alice") == nil || b.check(second, "alice") != nil {
		t.Error("eviction is not the same on both replicas")
	}

	// The database down: a signed id is taken on trust, a forged one is not; a session
	// started meanwhile is recorded once the database is back.
	pg.Stop(t, "fast")
	if err := a.check(second, "alice"); err != nil {
		t.Errorf("a known session refused while the database is down: %v", err)
	}
	if a.check("mm1.forged", "alice") == nil {
		t.Error("a forged id accepted while the database is down")
	}
	during := a.issue("bob")
	pg.Start(t)
	deadline := time.Now().Add(30 * time.Second)
	for b.check(during, "bob") != nil && time.Now().Before(deadline) { // until the pool reconnects
		a.check(during, "bob") // the use that records it
		time.Sleep(100 * time.Millisecond)
	}
	if err := b.check(during, "bob"); err != nil {
		t.Errorf("a session started during the outage is unknown to the other replica: %v", err)
	}
}

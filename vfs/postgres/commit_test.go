package postgres_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memory-mcp/memory-mcp/vfs"
	"github.com/memory-mcp/memory-mcp/vfs/vfstest"
)

// A connection lost during a commit does not decide the call's answer: the database is
// asked whether the change landed. A change whose commit landed is reported as made; one
// whose commit never reached the database is reported as failed, and is not there.
func TestPostgresCommitLostOnTheWay(t *testing.T) {
	ctx := context.Background()
	// A server of its own: the proxy reads the protocol in the clear, which a server from
	// MEMORY_MCP_TEST_DSN may not speak.
	dsn, name := vfstest.NewPostgresCluster(t).DSN, vfstest.UniqueName(t)
	proxy, via := startCommitProxy(t, dsn)
	s := openStore(t, via, name, true)
	create := func(file string) error {
		return s.Update(ctx, func(tx *vfs.Tx) error {
			return tx.CreateFile(vfs.MustResolve("/memories/"+file), []byte(file))
		})
	}
	if err := create("before.md"); err != nil {
		t.Fatal(err)
	}
	proxy.arm("answer")
	if err := create("answered.md"); err != nil {
		t.Errorf("a change whose commit landed, its answer lost, was reported as failed: %v", err)
	}
	proxy.arm("request")
	if err := create("unsent.md"); !errors.Is(err, vfs.ErrUnavailable) {
		t.Errorf("a change whose commit never reached the database: %v, want the database unavailable", err)
	}
	// The call's time ends during its commit (the proxy holds the commit, then ends the
	// call's context): the answer is the database's.
	late := func(file, at string) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		proxy.hold(at, cancel)
		return s.Update(ctx, func(tx *vfs.Tx) error {
			return tx.CreateFile(vfs.MustResolve("/memories/"+file), []byte(file))
		})
	}
	if err := late("answered-late.md", "answer"); err != nil {
		t.Errorf("a change whose commit landed as the call's time ended was reported as failed: %v", err)
	}
	if err := late("unsent-late.md", "request"); !errors.Is(err, context.Canceled) {
		t.Errorf("a change whose commit was held back as the call's time ended: %v, want the call's end", err)
	}
	if proxy.armed() != "" {
		t.Fatalf("the proxy never cut a commit (%s)", proxy.armed())
	}

	openStore(t, dsn, name, false).View(ctx, func(tx *vfs.Tx) error {
		for file, want := range map[string]bool{"before.md": true, "answered.md": true, "unsent.md": false, "answered-late.md": true, "unsent-late.md": false} {
			if _, err := tx.Stat(vfs.MustResolve("/memories/" + file)); (err == nil) != want {
				t.Errorf("%s: stat %v, want it there: %v", file, err, want)
			}
		}
		return nil
	})
}

// commitProxy relays connections to a PostgreSQL server and, once armed, cuts one at the
// next commit: before the server gets it ("request"), or after the server made it, before
// the client hears ("answer"). Armed with hold, it calls held there instead, and passes
// nothing more on that connection (in that direction) until the client closes it.
type commitProxy struct {
	mu   sync.Mutex
	cut  string
	held func()
}

func (p *commitProxy) arm(at string) { p.mu.Lock(); p.cut, p.held = at, nil; p.mu.Unlock() }

func (p *commitProxy) hold(at string, held func()) {
	p.mu.Lock()
	p.cut, p.held = at, held
	p.mu.Unlock()
}

func (p *commitProxy) armed() string { p.mu.Lock(); defer p.mu.Unlock(); return p.cut }

// take reports whether the proxy is armed to cut at at, disarming it, and calls held if it
// holds instead.
func (p *commitProxy) take(at string) (cut bool, held func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut != at {
		return false, nil
	}
	p.cut = ""
	return true, p.held
}

// swallow reads and drops messages from r until it ends, or until a client's Terminate
// (the server would close the connection then).
func swallow(r *bufio.Reader) {
	for {
		if msg, err := readMessage(r); err != nil || msg[0] == 'X' {
			return
		}
	}
}

// startCommitProxy starts a proxy to the server of dsn, and returns dsn through it.
func startCommitProxy(t *testing.T, dsn string) (*commitProxy, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	upstream := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &commitProxy{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.relay(c, upstream)
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return p, withParam(withParam(withParam(dsn, "host", "127.0.0.1"), "port", port), "sslmode", "disable")
}

// relay passes messages both ways until either side ends or a commit is cut.
func (p *commitProxy) relay(client net.Conn, upstream string) {
	server, err := net.Dial("tcp", upstream)
	if err != nil {
		client.Close()
		return
	}
	end := func() { client.Close(); server.Close() }
	defer end()
	go func() {
		defer end()
		r := bufio.NewReader(client)
		var size [4]byte // the startup message has no type byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		startup := make([]byte, binary.BigEndian.Uint32(size[:])-4)
		if _, err := io.ReadFull(r, startup); err != nil {
			return
		}
		server.Write(append(size[:], startup...))
		for {
			msg, err := readMessage(r)
			if err != nil {
				return
			}
			if msg[0] == 'Q' && bytes.EqualFold(bytes.TrimRight(msg[5:], "\x00"), []byte("commit")) {
				if cut, held := p.take("request"); held != nil {
					held()
					swallow(r)
					return
				} else if cut {
					return
				}
			}
			server.Write(msg)
		}
	}()
	r := bufio.NewReader(server)
	for {
		msg, err := readMessage(r)
		if err != nil {
			return
		}
		if msg[0] == 'C' && bytes.HasPrefix(msg[5:], []byte("COMMIT\x00")) {
			if cut, held := p.take("answer"); held != nil {
				held()
				swallow(r) // until the client's end closes the server's side
				return
			} else if cut {
				return
			}
		}
		client.Write(msg)
	}
}

// readMessage reads one message of the protocol: its type, length and body.
func readMessage(r *bufio.Reader) ([]byte, error) {
	head := make([]byte, 5)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	msg := append(head, make([]byte, binary.BigEndian.Uint32(head[1:])-4)...)
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}

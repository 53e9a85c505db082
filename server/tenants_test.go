package server

import (
	"fmt"
	"strings"
	"testing"
)

// A tenants file whose directories overlap, name the storage itself or the bookkeeping, or
// repeat a key is refused: each tenant gets a directory of its own and nothing else.
func TestParseTenantsRefusals(t *testing.T) {
	_, sha := NewToken()
	_, sha2 := NewToken()
	entry := func(name, dir string, hash string) string {
		if dir == "" {
			return fmt.Sprintf(`{"name":%q,"token_sha256":%q}`, name, hash)
		}
		return fmt.Sprintf(`{"name":%q,"token_sha256":%q,"dir":%q}`, name, hash, dir)
	}
	two := func(dir string) string {
		return `{"tenants":[` + entry("alice", "", sha) + `,` + entry("mallory", dir, sha2) + `]}`
	}
	for _, tc := range []struct {
		name, file, want string
		fold             bool
	}{
		{"dot", two("."), `dir "." must be a directory inside the storage`, false},
		{"dot slash", two("./"), `dir "." must be`, false},
		{"dot dot slash dot", two("./."), `dir "." must be`, false},
		{"up and back", two("x/.."), `dir "." must be`, false},
		{"up and dot", two("a/../."), `dir "." must be`, false},
		{"outside", two("../elsewhere"), `must be a directory inside the storage`, false},
		{"absolute", two("/srv/m"), `must be a directory inside the storage`, false},
		{"bookkeeping", two(".memory-mcp-history"), `not the storage itself nor the server's own files`, false},
		{"bookkeeping below", two("m/.Memory-MCP-history/x"), `nor the server's own files`, false},
		{"same", two("alice"), `directories "alice" and "alice" are the same or nest`, false},
		{"inside another", two("alice/sub"), `directories "alice" and "alice/sub" are the same or nest`, false},
		{"around another", `{"tenants":[` + entry("alice", "team/alice", sha) + `,` + entry("mallory", "team", sha2) + `]}`, `directories "team/alice" and "team" are the same or nest`, false},
		{"same but for case, folding", two("ALICE"), `directories "alice" and "ALICE" are the same or nest`, true},
		{"inside but for case, folding", two("Alice/x"), `are the same or nest`, true},
		{"duplicate key", `{"tenants":[{"name":"alice","token_sha256":"` + sha + `","read_only":true,"read_only":false}]}`, `line 1, column 128: the key "read_only" is given twice`, false},
		{"duplicate key in another case", `{"tenants":[{"name":"alice","token_sha256":"` + sha + `","read_only":true,"READ_ONLY":false}]}`, `the key "READ_ONLY" is given twice`, false},
		{"duplicate key folded as encoding/json folds it", `{"tenants":[{"name":"alice","token_sha256":"` + sha + `","token_ſha256":"` + sha2 + `"}]}`, `the key "token_ſha256" is given twice`, false},
		{"syntax error", "{\"tenants\": [\n  {\"name\": \"alice\",}\n]}", `tenants file: line 2, column `, false}, // 19 or 20: json v1 and v2 point at either side of the comma
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(was bool) { foldsCase = was }(foldsCase)
			foldsCase = tc.fold
			_, err := ParseTenants([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// Without folding, names that differ in case are two directories.
	foldsCase = false
	defer func() { foldsCase = !foldsCase }()
	if _, err := ParseTenants([]byte(two("ALICE"))); err != nil {
		t.Errorf("ALICE beside alice on a filesystem that keeps case: %v", err)
	}
}

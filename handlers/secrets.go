package handlers

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
)

// A secretRule recognises one kind of credential. Keywords are substrings that must all be
// absent for the (linear-time, RE2) expression to be skipped, so ordinary text costs a
// search for each keyword, not a dozen regular expression passes.
type secretRule struct {
	kind     string
	keywords []string
	pattern  string
	// allow, when set, accepts a match that is a known placeholder or documentation example.
	allow func(match string) bool
}

// secretRules is memory-mcp's credential rule set. Kinds are worded to follow "looks like a". It follows the formats that the
// providers document and that gitleaks' rules describe (read, not copied); see the README
// for why it is not gitleaks itself.
var secretRuleTable = []secretRule{
	{kind: "private key", keywords: []string{"PRIVATE KEY"},
		pattern: `-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----`},
	{kind: "Amazon Web Services access key", keywords: []string{"AKIA", "ASIA", "ABIA", "ACCA"},
		pattern: `\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`,
		allow:   func(m string) bool { return strings.HasSuffix(m, "EXAMPLE") }},
	{kind: "Amazon Web Services secret access key", keywords: []string{"aws", "AWS", "Aws"},
		pattern: `(?i)aws.{0,20}?(?:secret|private).{0,20}?[=:"'\s]\s*["']?[A-Za-z0-9/+]{40}\b`,
		allow: func(m string) bool {
			return strings.Contains(m, "EXAMPLEKEY")
		}},
	{kind: "GitHub token", keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		pattern: `\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{70,100})\b`},
	{kind: "GitLab token", keywords: []string{"glpat-"},
		pattern: `\bglpat-[A-Za-z0-9_-]{20,}`},
	{kind: "key for the Anthropic API", keywords: []string{"sk-ant-"},
		pattern: `\bsk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{32,}`},
	{kind: "key for the OpenAI API", keywords: []string{"sk-"},
		pattern: `\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})`},
	{kind: "Google API key", keywords: []string{"AIza"},
		pattern: `\bAIza[0-9A-Za-z_-]{35}\b`},
	{kind: "Slack token", keywords: []string{"xox"},
		pattern: `\bxox[abposr]-[0-9A-Za-z]{6,}-[0-9A-Za-z-]{6,}`},
	{kind: "Slack webhook URL", keywords: []string{"hooks.slack.com"},
		pattern: `https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/_-]{20,}`},
	{kind: "Stripe secret key", keywords: []string{"sk_live_", "rk_live_", "sk_test_", "rk_test_"},
		pattern: `\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,}\b`},
	{kind: "SendGrid API key", keywords: []string{"SG."},
		pattern: `\bSG\.[A-Za-z0-9_-]{20,24}\.[A-Za-z0-9_-]{40,50}\b`},
	{kind: "token for the npm registry", keywords: []string{"npm_"},
		pattern: `\bnpm_[A-Za-z0-9]{36}\b`},
	{kind: "PyPI token", keywords: []string{"pypi-"},
		pattern: `\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}`},
	{kind: "Hugging Face token", keywords: []string{"hf_"},
		pattern: `\bhf_[A-Za-z]{34}\b`},
	{kind: "DigitalOcean token", keywords: []string{"dop_v1_", "doo_v1_", "dor_v1_"},
		pattern: `\bdo[opr]_v1_[a-f0-9]{64}\b`},
	{kind: "storage account key for Azure", keywords: []string{"AccountKey="},
		pattern: `AccountKey=[A-Za-z0-9+/]{80,}={0,2}`},
	{kind: "JSON Web Token", keywords: []string{"eyJ"},
		pattern: `\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`},
	{kind: "password in a connection string", keywords: []string{"://"},
		pattern: `\b[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/@'"]{1,128}:([^\s@/'"]{1,256})@[^\s/'"]+`,
		allow:   placeholderPassword},
}

// compiledRule is a rule with its expression compiled.
type compiledRule struct {
	secretRule
	re       *regexp.Regexp
	keywords [][]byte
}

// secretRules compiles the table on first use: a server that is never asked to write pays
// nothing for it at start-up (about a millisecond otherwise).
var secretRules = sync.OnceValue(func() []compiledRule {
	rules := make([]compiledRule, len(secretRuleTable))
	for i, r := range secretRuleTable {
		rules[i] = compiledRule{r, regexp.MustCompile(r.pattern), nil}
		for _, k := range r.keywords {
			rules[i].keywords = append(rules[i].keywords, []byte(k))
		}
	}
	return rules
})

// mentioned reports whether one of the rule's keywords occurs in text.
func (r *compiledRule) mentioned(text []byte) bool {
	for _, k := range r.keywords {
		if bytes.Contains(text, k) {
			return true
		}
	}
	return false
}

var userinfo = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`://[^\s:/@'"]{1,128}:([^\s@/'"]{1,256})@`)
})

// placeholders are the complete forms a documented connection string puts where the
// password goes: ${NAME}, {{ name }}, %NAME%, <name>, a run of stars, or a word that says
// "password here". Text that merely starts like one ($uperS3cret, %41bc…, {{x) is a password.
var placeholders = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:\$\{[A-Za-z_][A-Za-z0-9_]*\}|\{\{\s*[A-Za-z_][A-Za-z0-9_.]*\s*\}\}|%[A-Za-z_][A-Za-z0-9_]*%|<[A-Za-z_][A-Za-z0-9_ .-]*>|\*+|x+|X+)$`)
})

// placeholderPassword accepts connection strings whose password is a placeholder.
func placeholderPassword(m string) bool {
	sub := userinfo().FindStringSubmatch(m)
	if sub == nil {
		return true
	}
	pw := sub[1]
	if placeholders().MatchString(pw) {
		return true
	}
	switch strings.ToLower(pw) {
	case "password", "pass", "passwd", "pwd", "your_password", "yourpassword", "mypassword", "changeme":
		return true
	}
	return false
}

// scanMargin is how far around a changed region the text is scanned: more than the longest
// credential the rules match, so one that the change completes is seen whole.
const scanMargin = 1024

// findSecret reports the first credential in text that lies in, or touches, the region
// [from, to) (a change wrote those bytes; from == to for a deletion): its kind and the
// 1-based line of text it starts on. Only the region and scanMargin bytes around it, to
// whole lines, are scanned, so an edit of a large file does not rescan (or copy) all of it.
func findSecret(text []byte, from, to int) (kind string, line int, found bool) {
	lo, hi := max(0, from-scanMargin), min(len(text), to+scanMargin)
	// Widen to whole lines (within another margin), so that the window's edges do not cut
	// a word in two and make something match that does not.
	if i := bytes.LastIndexByte(text[max(0, lo-scanMargin):lo], '\n'); i >= 0 {
		lo = max(0, lo-scanMargin) + i + 1
	} else {
		lo = max(0, lo-scanMargin)
	}
	if i := bytes.IndexByte(text[hi:min(len(text), hi+scanMargin)], '\n'); i >= 0 {
		hi += i
	} else {
		hi = min(len(text), hi+scanMargin)
	}
	window := text[lo:hi]
	at := -1
	for _, r := range secretRules() {
		if !r.mentioned(window) {
			continue
		}
		for _, loc := range r.re.FindAllIndex(window, -1) {
			start, end := lo+loc[0], lo+loc[1]
			if end < from || start > to {
				continue // not the change's doing
			}
			if r.allow != nil && r.allow(string(window[loc[0]:loc[1]])) {
				continue
			}
			if at < 0 || start < at {
				at, kind = start, r.kind
			}
			break
		}
	}
	if at < 0 {
		return "", 0, false
	}
	return kind, bytes.Count(text[:at], []byte{'\n'}) + 1, true
}

// HasSecret reports whether s (a path, say) contains what looks like a credential, so that
// a log line can leave it out.
func HasSecret(s string) bool {
	_, _, found := findSecret([]byte(s), 0, len(s))
	return found
}

package server

import (
	"slices"
	"time"
)

// The look's rule, in windows of lookWindow lines (see lookRule).
const (
	lookWindow  = 32
	lookMedian  = 30 * time.Microsecond // a window's median time to the line that makes the next one look
	midFrom     = 10 * time.Microsecond // a looked-for line in [midFrom, midTo) marks a client that
	midTo       = 40 * time.Microsecond // answers at once, slowed by the look itself
	restFirst   = 1024                  // lines without looks after the first window that showed such a client
	restLongest = 65536
)

// lookRule decides, line by line, whether the stdio loop looks for a client's next line
// before it waits in a read (see stdioLoop.spin). It looks while the client takes its time
// to answer, and stops for a client that answers at once, for which the look costs more
// than it saves:
//
//   - A window of lines whose median time to the line (from the worker's turning to read to
//     the line being there, whether it looked or waited) was lookMedian or more makes the
//     next window look: the TypeScript SDK's client's lines took 40–160 µs on this
//     project's machine, and a Go client's that answers at once mostly under 5 µs.
//   - A window whose looked-for lines came in midFrom–midTo µs for a quarter or more of them
//     stops the looks for restFirst lines, twice as many each time it happens again (up to
//     restLongest): a client that answers at once, in a run where it was slow (its lines
//     come in such runs), is slowed by the look itself (44% of the Go client's looked-for
//     lines came in 10–40 µs, 0.3% of the TypeScript client's).
//
// The zero value waits for its first window before looking.
type lookRule struct {
	times   [lookWindow]time.Duration // this window's times to the line
	n       int                       // lines in this window
	looked  int                       // of them looked for
	mid     int                       // of those, come in midFrom–midTo
	look    bool                      // the last window's median was lookMedian or more
	rest    int                       // lines left without looks
	restLen int                       // the last rest's length
}

// shouldLook says whether to look for the next line.
func (r *lookRule) shouldLook() bool { return r.look && r.rest == 0 }

// observe records how long the line took to come after the worker turned to read, and
// whether the worker looked for it.
func (r *lookRule) observe(d time.Duration, looked bool) {
	if r.rest > 0 {
		r.rest--
	}
	r.times[r.n] = d
	r.n++
	if looked {
		r.looked++
		if d >= midFrom && d < midTo {
			r.mid++
		}
	}
	if r.n < lookWindow {
		return
	}
	slices.Sort(r.times[:])
	r.look = r.times[lookWindow/2] >= lookMedian
	if r.looked >= lookWindow/2 && 4*r.mid >= r.looked {
		r.restLen = min(max(2*r.restLen, restFirst), restLongest)
		r.rest = r.restLen
	}
	r.n, r.looked, r.mid = 0, 0, 0
}

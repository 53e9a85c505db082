package files

import "time"

// heldWaits are the pauses between the tries of retryWhile: about two seconds in all.
var heldWaits = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	400 * time.Millisecond, 600 * time.Millisecond, 600 * time.Millisecond,
}

// retryWhile runs op, and again after each of heldWaits while it fails with an error that
// transient says may pass: on Windows a file that another program (an antivirus, the search
// indexer, a backup) holds open for a moment cannot be renamed, replaced or removed, which
// would otherwise fail the change. Other failures return at once.
func retryWhile(op func() error, transient func(error) bool, sleep func(time.Duration)) error {
	err := op()
	for _, wait := range heldWaits {
		if err == nil || !transient(err) {
			return err
		}
		sleep(wait)
		err = op()
	}
	return err
}

// held runs a rename or removal, retrying it while another program holds a file open.
func held(op func() error) error { return retryWhile(op, heldOpen, heldSleep) }

var heldSleep = time.Sleep // a test lets go of the file instead

//go:build !linux && !darwin

package files

// renameNoReplace checks, then renames. Without renameat2 the check and the move are two
// steps; the Store's storage lock keeps other memory-mcp processes out of that window.
func (f *OSFs) renameNoReplace(oldname, newname string) error {
	return f.renameCheckFirst(oldname, newname)
}

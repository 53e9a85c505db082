// mix.mjs is the side-by-side run's round of seven calls to memory-mcp on a file of its own
// (create, view, str_replace, insert, list the directory, rename, view again), shared by
// sidebyside.mjs and pairs.mjs.

// memoryMix returns round i's calls, as [tool, arguments] pairs.
export function memoryMix(i) {
  const f = `/memories/note-${i}.md`, g = `/memories/moved-${i}.md`;
  return [
    ['memory_create', { path: f, file_text: '# notes\nfirst line\n' }],
    ['memory_view', { path: f }],
    ['memory_str_replace', { path: f, old_str: 'first line', new_str: 'first LINE' }],
    ['memory_insert', { path: f, insert_line: 1, insert_text: '- fact' }],
    ['memory_view', { path: '/memories' }],
    ['memory_rename', { old_path: f, new_path: g }],
    ['memory_view', { path: g }],
  ];
}

package lockfile

// retryRename: a rename over an open file fails transiently on Windows.
const retryRename = true

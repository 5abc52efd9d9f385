#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift cannot import: bound
/// text and blobs are copied by SQLite with it.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif

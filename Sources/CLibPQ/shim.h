// libpq, PostgreSQL's own client library (libpq-dev), for CurlQueuePostgres.
#include <libpq-fe.h>

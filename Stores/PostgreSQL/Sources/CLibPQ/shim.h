// Debian/Ubuntu install libpq-fe.h in /usr/include/postgresql, which is not on the
// default include path; Homebrew and most other systems put it on the include path
// directly. Try the Debian location first, then the plain name.
#if __has_include(<postgresql/libpq-fe.h>)
#include <postgresql/libpq-fe.h>
#else
#include <libpq-fe.h>
#endif

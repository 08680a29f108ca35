/* Only jemalloc's control interface is declared here: linking the library is what makes it the process's
   malloc (it defines malloc, free and friends, and comes before libc in the link). Re-declaring those
   here would give Swift two candidates for every call to malloc. */
#include <stddef.h>
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

/* @rpath/libfoo.dylib: what the sample models import from it. */
void *malloc(unsigned long);

static void *state;

int foo_init(void) { state = malloc(16); return state != 0; }
int foo_run(void *arg) { return arg == state; }

/* Every way an import from one library is recorded: a call through a stub (a lazy
 * bind with dyld info, a chained import otherwise), a data pointer with an addend (a
 * non-lazy bind), an address taken in code (a GOT entry), and their undefined
 * symbols. libfoo is the dependency weak-linked; libSystem's imports must stay strong. */
int printf(const char *, ...);
int foo_run(void *);
extern int foo_table[];
extern char foo_big[];

int *foo_slot = &foo_table[4];

int weak_link_user(void *arg) {
    char *big = foo_big;
    printf("%p\n", (void *)big);
    return foo_run(arg) + *foo_slot;
}

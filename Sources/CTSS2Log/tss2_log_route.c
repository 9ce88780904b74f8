/* See include/tss2_log_route.h. */
#define _GNU_SOURCE
#include "tss2_log_route.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The relocation types by which a shared library refers to a data symbol of another object. */
#if defined(__x86_64__)
#define KC_RELOC_GLOB_DAT R_X86_64_GLOB_DAT
#define KC_RELOC_ABS R_X86_64_64
#elif defined(__aarch64__)
#define KC_RELOC_GLOB_DAT R_AARCH64_GLOB_DAT
#define KC_RELOC_ABS R_AARCH64_ABS64
#endif

#if __ELF_NATIVE_CLASS == 64
#define KC_R_SYM(info) ELF64_R_SYM(info)
#define KC_R_TYPE(info) ELF64_R_TYPE(info)
#else
#define KC_R_SYM(info) ELF32_R_SYM(info)
#define KC_R_TYPE(info) ELF32_R_TYPE(info)
#endif

static kc_tss2_log_sink current_sink; /* read and written atomically */
static FILE *routed_stream;           /* the FILE * every redirected slot leads to */
static pthread_once_t stream_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t route_lock = PTHREAD_MUTEX_INITIALIZER;

/* A line being assembled. Only the stream's write function touches it, and stdio holds the
 * stream's lock around that call. */
static char pending[1024];
static size_t pending_length;

static void emit_pending(void)
{
    kc_tss2_log_sink sink = __atomic_load_n(&current_sink, __ATOMIC_ACQUIRE);
    if (sink != NULL && pending_length > 0)
        sink(pending, pending_length);
    pending_length = 0;
}

static ssize_t stream_write(void *cookie, const char *buffer, size_t size)
{
    (void)cookie;
    for (size_t i = 0; i < size; i++) {
        char c = buffer[i];
        if (c == '\n') {
            emit_pending();
        } else {
            if (pending_length == sizeof(pending) - 1)
                emit_pending(); /* an over-long line goes out in pieces */
            pending[pending_length++] = c;
        }
    }
    return (ssize_t)size;
}

static void open_stream(void)
{
    cookie_io_functions_t functions = { .read = NULL, .write = stream_write, .seek = NULL, .close = NULL };
    FILE *stream = fopencookie(NULL, "w", functions);
    if (stream != NULL)
        setvbuf(stream, NULL, _IOLBF, 0);
    routed_stream = stream;
}

#ifdef KC_RELOC_GLOB_DAT

struct route_result {
    int redirected;
    int failed;
};

/* An address in the loaded object: the dynamic section's pointers are absolute once the dynamic
 * linker has relocated them (glibc on x86_64 and aarch64), offsets from the load address otherwise. */
static uintptr_t in_object(const struct dl_phdr_info *info, uintptr_t value)
{
    return value < info->dlpi_addr ? value + info->dlpi_addr : value;
}

/* Points one GOT slot at our stream. The slot may lie in the RELRO part, which the dynamic
 * linker made read-only (whole pages from the segment's start to its end rounded down). */
static int redirect_slot(FILE **slot, uintptr_t relro_start, uintptr_t relro_end)
{
    FILE **target = &routed_stream;
    if (__atomic_load_n((FILE ***)slot, __ATOMIC_ACQUIRE) == target)
        return 0;
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t page = (uintptr_t)slot & ~(page_size - 1);
    int read_only = page >= relro_start && page < relro_end;
    if (read_only && mprotect((void *)page, page_size, PROT_READ | PROT_WRITE) != 0)
        return -1;
    __atomic_store_n((FILE ***)slot, target, __ATOMIC_RELEASE);
    if (read_only)
        mprotect((void *)page, page_size, PROT_READ);
    return 1;
}

static void redirect_relocations(const struct dl_phdr_info *info, const ElfW(Rela) *relocations, size_t count,
                                 const ElfW(Sym) *symbols, const char *strings, size_t strings_size,
                                 uintptr_t relro_start, uintptr_t relro_end, struct route_result *result)
{
    for (size_t i = 0; i < count; i++) {
        unsigned long type = KC_R_TYPE(relocations[i].r_info);
        if (type != KC_RELOC_GLOB_DAT && type != KC_RELOC_ABS)
            continue;
        const ElfW(Sym) *symbol = &symbols[KC_R_SYM(relocations[i].r_info)];
        if (symbol->st_name >= strings_size || strcmp(strings + symbol->st_name, "stderr") != 0)
            continue;
        if (relocations[i].r_addend != 0)
            continue;
        int done = redirect_slot((FILE **)(info->dlpi_addr + relocations[i].r_offset), relro_start, relro_end);
        if (done < 0)
            result->failed++;
        else
            result->redirected++;
    }
}

static int route_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct route_result *result = data;
    const char *name = info->dlpi_name;
    if (name == NULL || name[0] == '\0')
        return 0;
    const char *base = strrchr(name, '/');
    base = base != NULL ? base + 1 : name;
    if (strncmp(base, "libtss2-", 8) != 0)
        return 0;

    const ElfW(Dyn) *dynamic = NULL;
    uintptr_t relro_start = 0, relro_end = 0;
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[i];
        if (header->p_type == PT_DYNAMIC)
            dynamic = (const ElfW(Dyn) *)(info->dlpi_addr + header->p_vaddr);
        if (header->p_type == PT_GNU_RELRO) {
            relro_start = (info->dlpi_addr + header->p_vaddr) & ~(page_size - 1);
            relro_end = (info->dlpi_addr + header->p_vaddr + header->p_memsz) & ~(page_size - 1);
        }
    }
    if (dynamic == NULL)
        return 0;

    uintptr_t symbols = 0, strings = 0, rela = 0, jmprel = 0;
    size_t strings_size = 0, rela_size = 0, rela_entry = sizeof(ElfW(Rela)), jmprel_size = 0;
    int plt_is_rela = 0;
    for (const ElfW(Dyn) *entry = dynamic; entry->d_tag != DT_NULL; entry++) {
        switch (entry->d_tag) {
        case DT_SYMTAB: symbols = in_object(info, entry->d_un.d_ptr); break;
        case DT_STRTAB: strings = in_object(info, entry->d_un.d_ptr); break;
        case DT_STRSZ: strings_size = entry->d_un.d_val; break;
        case DT_RELA: rela = in_object(info, entry->d_un.d_ptr); break;
        case DT_RELASZ: rela_size = entry->d_un.d_val; break;
        case DT_RELAENT: rela_entry = entry->d_un.d_val; break;
        case DT_JMPREL: jmprel = in_object(info, entry->d_un.d_ptr); break;
        case DT_PLTRELSZ: jmprel_size = entry->d_un.d_val; break;
        case DT_PLTREL: plt_is_rela = entry->d_un.d_val == DT_RELA; break;
        default: break;
        }
    }
    if (symbols == 0 || strings == 0 || rela_entry != sizeof(ElfW(Rela)))
        return 0;
    if (rela != 0)
        redirect_relocations(info, (const ElfW(Rela) *)rela, rela_size / rela_entry, (const ElfW(Sym) *)symbols,
                             (const char *)strings, strings_size, relro_start, relro_end, result);
    if (jmprel != 0 && plt_is_rela)
        redirect_relocations(info, (const ElfW(Rela) *)jmprel, jmprel_size / rela_entry, (const ElfW(Sym) *)symbols,
                             (const char *)strings, strings_size, relro_start, relro_end, result);
    return 0;
}

#endif

int kc_tss2_log_route(kc_tss2_log_sink sink)
{
    __atomic_store_n(&current_sink, sink, __ATOMIC_RELEASE);
    pthread_once(&stream_once, open_stream);
    if (routed_stream == NULL)
        return -1;
#ifdef KC_RELOC_GLOB_DAT
    struct route_result result = { 0, 0 };
    pthread_mutex_lock(&route_lock);
    dl_iterate_phdr(route_object, &result);
    pthread_mutex_unlock(&route_lock);
    return result.failed > 0 ? -1 : result.redirected;
#else
    return 0;
#endif
}

int kc_tss2_preload_tcti(const char *configuration)
{
    if (configuration == NULL)
        return -1;
    /* The TCTI loader's rule: the name is what comes before the first ':'. */
    char name[256];
    size_t length = strcspn(configuration, ":");
    if (length == 0 || length >= sizeof(name))
        return -1;
    memcpy(name, configuration, length);
    name[length] = '\0';

    char file[300];
    const char *patterns[] = { "libtss2-tcti-%s.so.0", "libtss2-tcti-%s.so" };
    int found = 0;
    if (strchr(name, '/') == NULL && strchr(name, '.') == NULL) {
        for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]) && !found; i++) {
            snprintf(file, sizeof(file), patterns[i], name);
            found = dlopen(file, RTLD_NOW | RTLD_LOCAL) != NULL;
        }
    }
    if (!found)
        found = dlopen(name, RTLD_NOW | RTLD_LOCAL) != NULL;
    (void)dlerror(); /* the host's next dlerror() should not see our misses */
    return found ? 0 : -1;
}

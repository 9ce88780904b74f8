/* The Secret Service's vtables (see include/secret_service_bus.h). */
#include "secret_service_bus.h"

#include <errno.h>
#include <string.h>

static kc_ss_method_fn method_fn;
static kc_ss_get_fn get_fn;
static kc_ss_set_fn set_fn;
static kc_ss_find_fn find_fn;

#define SERVICE "org.freedesktop.Secret.Service"
#define COLLECTION "org.freedesktop.Secret.Collection"
#define ITEM "org.freedesktop.Secret.Item"
#define SESSION "org.freedesktop.Secret.Session"
#define PROMPT "org.freedesktop.Secret.Prompt"
/* keychaind's own interface beside the Secret Service's (gnome-keyring keeps its own under
 * org.gnome.keyring the same way); the project has no domain to name it after. */
#define DAEMON "keychain_pkcs11.Daemon"

static int on_method(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    (void)userdata;
    return method_fn(message, sd_bus_message_get_path(message), sd_bus_message_get_interface(message),
                     sd_bus_message_get_member(message), error);
}

static int on_get(sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *reply,
                  void *userdata, sd_bus_error *error) {
    (void)bus;
    (void)userdata;
    return get_fn(path, interface, property, reply, error);
}

static int on_set(sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *value,
                  void *userdata, sd_bus_error *error) {
    (void)bus;
    (void)userdata;
    return set_fn(path, interface, property, value, error);
}

static int on_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found, sd_bus_error *error) {
    (void)bus;
    (void)error;
    if (!find_fn(path, interface)) return 0;
    *found = userdata;
    return 1;
}

/* Runs before the vtables for every message below a prefix: an object that does not exist gets
 * Secret.Error.NoSuchObject; anything else goes on (0). */
static int on_any(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    const char *interface = userdata;
    const char *path = sd_bus_message_get_path(message);
    const char *called = sd_bus_message_get_interface(message);
    if (!sd_bus_message_is_method_call(message, NULL, NULL) || path == NULL) return 0;
    /* Introspection of the prefix nodes themselves stays sd-bus's. */
    if (called != NULL && strcmp(called, "org.freedesktop.DBus.Introspectable") == 0) return 0;
    if (find_fn(path, interface) || (strcmp(interface, COLLECTION) == 0 && find_fn(path, ITEM))) return 0;
    sd_bus_error_set(error, "org.freedesktop.Secret.Error.NoSuchObject", "No such object in the keychain's Secret Service");
    return -ENOENT;
}

static const sd_bus_vtable service_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("OpenSession", "sv", "vo", on_method, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE),
    SD_BUS_METHOD("CreateCollection", "a{sv}s", "oo", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("SearchItems", "a{ss}", "aoao", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Unlock", "ao", "aoo", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Lock", "ao", "aoo", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("GetSecrets", "aoo", "a{o(oayays)}", on_method, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE),
    SD_BUS_METHOD("ReadAlias", "s", "o", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("SetAlias", "so", "", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL("CollectionCreated", "o", 0),
    SD_BUS_SIGNAL("CollectionDeleted", "o", 0),
    SD_BUS_SIGNAL("CollectionChanged", "o", 0),
    SD_BUS_PROPERTY("Collections", "ao", on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_VTABLE_END};

static const sd_bus_vtable collection_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Delete", "", "o", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("SearchItems", "a{ss}", "ao", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("CreateItem", "a{sv}(oayays)b", "oo", on_method, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE),
    SD_BUS_SIGNAL("ItemCreated", "o", 0),
    SD_BUS_SIGNAL("ItemDeleted", "o", 0),
    SD_BUS_SIGNAL("ItemChanged", "o", 0),
    SD_BUS_PROPERTY("Items", "ao", on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_WRITABLE_PROPERTY("Label", "s", on_get, on_set, 0, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Locked", "b", on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Created", "t", on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Modified", "t", on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_VTABLE_END};

static const sd_bus_vtable item_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Delete", "", "o", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("GetSecret", "o", "(oayays)", on_method, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE),
    SD_BUS_METHOD("SetSecret", "(oayays)", "", on_method, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE),
    SD_BUS_PROPERTY("Locked", "b", on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_WRITABLE_PROPERTY("Attributes", "a{ss}", on_get, on_set, 0, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_WRITABLE_PROPERTY("Label", "s", on_get, on_set, 0, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Type", "s", on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Created", "t", on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Modified", "t", on_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_VTABLE_END};

static const sd_bus_vtable session_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Close", "", "", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END};

static const sd_bus_vtable prompt_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Prompt", "s", "", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Dismiss", "", "", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL("Completed", "bv", 0),
    SD_BUS_VTABLE_END};

/* Stop: the daemon replies, then exits as on SIGTERM (its keys wiped, its socket removed, the
 * name released). Only callers of the daemon's own uid are obeyed (the handler checks). */
static const sd_bus_vtable daemon_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Stop", "", "", on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END};

int kc_secret_service_register(sd_bus *bus, kc_ss_method_fn method, kc_ss_get_fn get, kc_ss_set_fn set, kc_ss_find_fn find) {
    static char collection_name[] = COLLECTION;
    static char session_name[] = SESSION;
    static char prompt_name[] = PROMPT;
    int r;
    if (bus == NULL || method == NULL || get == NULL || set == NULL || find == NULL) return -EINVAL;
    method_fn = method;
    get_fn = get;
    set_fn = set;
    find_fn = find;
    r = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/secrets", SERVICE, service_vtable, NULL);
    if (r < 0) return r;
    r = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/secrets", DAEMON, daemon_vtable, NULL);
    if (r < 0) return r;
    static const char *const prefixes[] = {"/org/freedesktop/secrets/collection", "/org/freedesktop/secrets/aliases"};
    for (unsigned i = 0; i < 2; i++) {
        r = sd_bus_add_fallback(bus, NULL, prefixes[i], on_any, collection_name);
        if (r < 0) return r;
        r = sd_bus_add_fallback_vtable(bus, NULL, prefixes[i], COLLECTION, collection_vtable, on_find, NULL);
        if (r < 0) return r;
        r = sd_bus_add_fallback_vtable(bus, NULL, prefixes[i], ITEM, item_vtable, on_find, NULL);
        if (r < 0) return r;
    }
    r = sd_bus_add_fallback(bus, NULL, "/org/freedesktop/secrets/session", on_any, session_name);
    if (r < 0) return r;
    r = sd_bus_add_fallback_vtable(bus, NULL, "/org/freedesktop/secrets/session", SESSION, session_vtable, on_find, NULL);
    if (r < 0) return r;
    r = sd_bus_add_fallback(bus, NULL, "/org/freedesktop/secrets/prompt", on_any, prompt_name);
    if (r < 0) return r;
    return sd_bus_add_fallback_vtable(bus, NULL, "/org/freedesktop/secrets/prompt", PROMPT, prompt_vtable, on_find, NULL);
}

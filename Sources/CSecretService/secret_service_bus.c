/* The Secret Service's vtables (see include/secret_service_bus.h). */
#include "secret_service_bus.h"

#include <errno.h>
#include <string.h>

#define SERVICE "org.freedesktop.Secret.Service"
#define COLLECTION "org.freedesktop.Secret.Collection"
#define ITEM "org.freedesktop.Secret.Item"
#define SESSION "org.freedesktop.Secret.Session"
#define PROMPT "org.freedesktop.Secret.Prompt"
/* keychaind's own interface beside the Secret Service's (gnome-keyring keeps its own under
 * org.gnome.keyring the same way); the project has no domain to name it after. */
#define DAEMON "keychain_pkcs11.Daemon"

/* USERDATA is always the registered kc_ss_handlers. */

static int on_method(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    const kc_ss_handlers *handlers = userdata;
    return handlers->method(handlers->userdata, message, sd_bus_message_get_path(message),
                            sd_bus_message_get_interface(message), sd_bus_message_get_member(message), error);
}

static int on_get(sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *reply,
                  void *userdata, sd_bus_error *error) {
    const kc_ss_handlers *handlers = userdata;
    (void)bus;
    return handlers->get(handlers->userdata, path, interface, property, reply, error);
}

static int on_set(sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *value,
                  void *userdata, sd_bus_error *error) {
    const kc_ss_handlers *handlers = userdata;
    (void)bus;
    return handlers->set(handlers->userdata, path, interface, property, value, error);
}

static int on_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found, sd_bus_error *error) {
    const kc_ss_handlers *handlers = userdata;
    (void)bus;
    (void)error;
    if (!handlers->find(handlers->userdata, path, interface)) return 0;
    *found = userdata;
    return 1;
}

/* Runs before the vtables for every message below a prefix: an object that does not exist gets
 * Secret.Error.NoSuchObject; anything else goes on (0). */
static int refuse_missing(sd_bus_message *message, const kc_ss_handlers *handlers, const char *interface, sd_bus_error *error) {
    const char *path = sd_bus_message_get_path(message);
    const char *called = sd_bus_message_get_interface(message);
    if (!sd_bus_message_is_method_call(message, NULL, NULL) || path == NULL) return 0;
    /* Introspection of the prefix nodes themselves stays sd-bus's. */
    if (called != NULL && strcmp(called, "org.freedesktop.DBus.Introspectable") == 0) return 0;
    if (handlers->find(handlers->userdata, path, interface)) return 0;
    if (strcmp(interface, COLLECTION) == 0 && handlers->find(handlers->userdata, path, ITEM)) return 0;
    sd_bus_error_set(error, "org.freedesktop.Secret.Error.NoSuchObject", "No such object in the keychain's Secret Service");
    return -ENOENT;
}

static int on_any_collection(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    return refuse_missing(message, userdata, COLLECTION, error);
}

static int on_any_session(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    return refuse_missing(message, userdata, SESSION, error);
}

static int on_any_prompt(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    return refuse_missing(message, userdata, PROMPT, error);
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

int kc_secret_service_register(sd_bus *bus, const kc_ss_handlers *handlers, sd_bus_slot *slots[KC_SS_SLOT_COUNT]) {
    static const char *const item_prefixes[] = {"/org/freedesktop/secrets/collection", "/org/freedesktop/secrets/aliases"};
    void *userdata = (void *)handlers;
    unsigned next = 0;
    int r;
    if (slots == NULL) return -EINVAL;
    for (unsigned i = 0; i < KC_SS_SLOT_COUNT; i++) slots[i] = NULL;
    if (bus == NULL || handlers == NULL || handlers->method == NULL || handlers->get == NULL || handlers->set == NULL ||
        handlers->find == NULL)
        return -EINVAL;
    r = sd_bus_add_object_vtable(bus, &slots[next++], "/org/freedesktop/secrets", SERVICE, service_vtable, userdata);
    if (r < 0) return r;
    r = sd_bus_add_object_vtable(bus, &slots[next++], "/org/freedesktop/secrets", DAEMON, daemon_vtable, userdata);
    if (r < 0) return r;
    for (unsigned i = 0; i < 2; i++) {
        r = sd_bus_add_fallback(bus, &slots[next++], item_prefixes[i], on_any_collection, userdata);
        if (r < 0) return r;
        r = sd_bus_add_fallback_vtable(bus, &slots[next++], item_prefixes[i], COLLECTION, collection_vtable, on_find, userdata);
        if (r < 0) return r;
        r = sd_bus_add_fallback_vtable(bus, &slots[next++], item_prefixes[i], ITEM, item_vtable, on_find, userdata);
        if (r < 0) return r;
    }
    r = sd_bus_add_fallback(bus, &slots[next++], "/org/freedesktop/secrets/session", on_any_session, userdata);
    if (r < 0) return r;
    r = sd_bus_add_fallback_vtable(bus, &slots[next++], "/org/freedesktop/secrets/session", SESSION, session_vtable, on_find, userdata);
    if (r < 0) return r;
    r = sd_bus_add_fallback(bus, &slots[next++], "/org/freedesktop/secrets/prompt", on_any_prompt, userdata);
    if (r < 0) return r;
    return sd_bus_add_fallback_vtable(bus, &slots[next++], "/org/freedesktop/secrets/prompt", PROMPT, prompt_vtable, on_find, userdata);
}

/*
 * The freedesktop Secret Service's D-Bus objects on sd-bus (libsystemd), for keychaind.
 *
 * sd-bus describes objects with C designated-initializer tables (SD_BUS_METHOD, SD_BUS_PROPERTY),
 * which Swift cannot build: this file holds the tables of the five interfaces, with every method,
 * property getter and setter and object lookup forwarded to the four functions of a
 * kc_ss_handlers. Everything else (the dispatch by interface and member, reading arguments,
 * replies, signals) is done in Swift (Sources/SecretService) with sd-bus's non-variadic calls.
 * The Swift dispatch table declares the same signatures; SecretServiceTests compares the two.
 */
#ifndef KC_SECRET_SERVICE_BUS_H
#define KC_SECRET_SERVICE_BUS_H

#include <stddef.h>
#include <systemd/sd-bus.h>

/* Each function gets the handlers' USERDATA first (the server). */

/* A method call on PATH: reply (sd_bus_send) and return > 0, or set ERROR and return a negative
 * errno. */
typedef int (*kc_ss_method_fn)(void *userdata, sd_bus_message *message, const char *path, const char *interface,
                               const char *member, sd_bus_error *error);
/* Append the bare value of PROPERTY of the object at PATH to REPLY; >= 0 on success. */
typedef int (*kc_ss_get_fn)(void *userdata, const char *path, const char *interface, const char *property,
                            sd_bus_message *reply, sd_bus_error *error);
/* Read the bare new value of PROPERTY from VALUE and apply it; >= 0 on success. */
typedef int (*kc_ss_set_fn)(void *userdata, const char *path, const char *interface, const char *property,
                            sd_bus_message *value, sd_bus_error *error);
/* 1 when an object with INTERFACE lives at PATH (a collection, item, session or prompt), else 0. */
typedef int (*kc_ss_find_fn)(void *userdata, const char *path, const char *interface);

/* The daemon's side of the objects. sd-bus is given a pointer to this structure as the userdata
 * of every vtable and fallback (one pointer carries both the functions and their USERDATA), so
 * it must live as long as the slots kc_secret_service_register fills. */
typedef struct kc_ss_handlers {
    kc_ss_method_fn method;
    kc_ss_get_fn get;
    kc_ss_set_fn set;
    kc_ss_find_fn find;
    void *userdata;
} kc_ss_handlers;

/* The number of slots kc_secret_service_register fills: the service object and keychaind's own
 * interface on it (keychain_pkcs11.Daemon: Stop), and for each of the
 * collection and alias prefixes a fallback and the collection and item vtables, and for each of
 * the session and prompt prefixes a fallback and a vtable. */
#define KC_SS_SLOT_COUNT 12

/* Registers the service object at /org/freedesktop/secrets and the collection, alias, item,
 * session and prompt objects below it, each registration in a slot of SLOTS (set to NULL first;
 * the caller unreferences every non-NULL slot, also after a failure, to unregister). A call to an
 * object that does not exist is answered with org.freedesktop.Secret.Error.NoSuchObject (clients
 * such as secretstorage 3.3 expect that name, not sd-bus's own UnknownObject). Returns >= 0, or a
 * negative errno. */
int kc_secret_service_register(sd_bus *bus, const kc_ss_handlers *handlers, sd_bus_slot *slots[KC_SS_SLOT_COUNT]);

#endif

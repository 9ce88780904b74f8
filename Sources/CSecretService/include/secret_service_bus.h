/*
 * The freedesktop Secret Service's D-Bus objects on sd-bus (libsystemd), for keychaind.
 *
 * sd-bus describes objects with C designated-initializer tables (SD_BUS_METHOD, SD_BUS_PROPERTY),
 * which Swift cannot build: this file holds the tables of the five interfaces (and keychaind's
 * own), with every method, property getter and setter and object lookup forwarded to the four
 * functions the daemon gives kc_secret_service_register. Everything else (reading arguments,
 * replies, signals) is done from Swift with sd-bus's non-variadic calls.
 */
#ifndef KC_SECRET_SERVICE_BUS_H
#define KC_SECRET_SERVICE_BUS_H

#include <systemd/sd-bus.h>

/* A method call on PATH: reply (sd_bus_reply_* / sd_bus_send) and return > 0, or set ERROR and
 * return a negative errno. */
typedef int (*kc_ss_method_fn)(sd_bus_message *message, const char *path, const char *interface, const char *member,
                               sd_bus_error *error);
/* Append the bare value of PROPERTY of the object at PATH to REPLY; >= 0 on success. */
typedef int (*kc_ss_get_fn)(const char *path, const char *interface, const char *property, sd_bus_message *reply,
                            sd_bus_error *error);
/* Read the bare new value of PROPERTY from VALUE and apply it; >= 0 on success. */
typedef int (*kc_ss_set_fn)(const char *path, const char *interface, const char *property, sd_bus_message *value,
                            sd_bus_error *error);
/* 1 when an object with INTERFACE lives at PATH (a collection, item, session or prompt), else 0. */
typedef int (*kc_ss_find_fn)(const char *path, const char *interface);

/* Registers the service object at /org/freedesktop/secrets (with keychaind's own
 * keychain_pkcs11.Daemon interface beside the Secret Service's: Stop) and the collection, alias,
 * item, session and prompt objects below it. A call to an object that does not exist is answered with
 * org.freedesktop.Secret.Error.NoSuchObject (clients such as secretstorage 3.3 expect that name,
 * not sd-bus's own UnknownObject). Returns >= 0, or a negative errno. */
int kc_secret_service_register(sd_bus *bus, kc_ss_method_fn method, kc_ss_get_fn get, kc_ss_set_fn set, kc_ss_find_fn find);

#endif

# Keychain PKCS#11: build, install, uninstall, test.
#
#   make                          release build (scripts/build-release.sh: static Swift stdlib)
#   make install [PREFIX=/usr]    install the module, keychainctl, keychaind, PAM module, header, p11-kit file,
#                                 docs with the licence, shell completions and manual pages
#   make uninstall [PREFIX=…]     remove exactly what install put
#   make check                    every test (scripts/test.sh)
#   make install PREBUILT=1       install the release build .build/release-path names, without
#                                 building (debian/rules with KEYCHAIN_PKCS11_PREBUILT=1)
#
# DESTDIR stages an install for packaging: files go to $(DESTDIR)$(PREFIX)/…, while the paths
# written into them (the p11-kit module: line) stay $(PREFIX)/….
#
# p11-kit reads module files only from /usr/share/p11-kit/modules (system) and
# ~/.config/pkcs11/modules (per user). The file is installed under $(DATADIR)/p11-kit/modules for
# every prefix; with PREFIX=/usr that is the system directory, for other prefixes register the
# module with 'keychainctl p11-kit register' (or copy the installed file to one of those two).

PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
DATADIR     ?= $(PREFIX)/share
DOCDIR      ?= $(DATADIR)/doc/keychain-pkcs11
# `keychainctl module-path` looks beside itself and in ../lib, ../lib/x86_64-linux-gnu and
# ../lib/pkcs11: keep LIBDIR at $(PREFIX)/lib for it to find the module.
MODULEDIR   ?= $(LIBDIR)/pkcs11
P11KITDIR   ?= $(DATADIR)/p11-kit/modules
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR  ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d
MAN1DIR     ?= $(DATADIR)/man/man1
SYSTEMDUSERDIR ?= $(LIBDIR)/systemd/user
# PAM modules live in the multiarch security folder (/usr/lib/x86_64-linux-gnu/security with PREFIX=/usr).
PAMDIR      ?= $(LIBDIR)/$(shell gcc -print-multiarch)/security

MODULE := $(MODULEDIR)/libkeychain-pkcs11.so
DOCS   := README.md $(wildcard Docs/*.md Docs/*.png)
# The licence (LICENSE, Apache-2.0) and the copyright file (debian/copyright: the copyright and
# licences of this project and of everything its binaries contain, such as the statically linked
# Swift runtime) go with the docs. The Debian package installs neither (LICENSEDOCS= in
# debian/rules): dh_installdocs installs debian/copyright there itself, and Debian wants no other
# licence file.
LICENSEDOCS ?= 1
LICENSEFILES = $(if $(filter 1,$(LICENSEDOCS)),$(DOCDIR)/LICENSE $(DOCDIR)/copyright)
# Everything install puts, as installed paths (without DESTDIR). Docs keep their folder, so that
# the README's links into Docs/ still work.
FILES  := $(MODULE) $(BINDIR)/keychainctl $(BINDIR)/keychaind $(INCLUDEDIR)/keychain-pkcs11.h \
          $(SYSTEMDUSERDIR)/keychaind.socket $(SYSTEMDUSERDIR)/keychaind.service $(PAMDIR)/pam_keychain.so \
          $(P11KITDIR)/keychain-pkcs11.module $(addprefix $(DOCDIR)/,$(DOCS)) $(LICENSEFILES) \
          $(BASHCOMPDIR)/keychainctl $(ZSHCOMPDIR)/_keychainctl $(FISHCOMPDIR)/keychainctl.fish $(MAN1DIR)/keychainctl.1 \
          $(MAN1DIR)/keychaind.1
# Besides keychainctl.1, one manual page per command: keychainctl.COMMAND.1 (made by build).
MANPAGES = $(notdir $(wildcard .build/man/keychainctl.*.1))
# Directories that install created (installed paths), so that uninstall removes them again when
# empty; kept only for real installs, not DESTDIR staging (package managers track their own).
CREATED := $(DOCDIR)/installed-directories

# The release build's output folder; read when a recipe runs, after `build`.
BIN = $(shell cat .build/release-path)

.PHONY: all build prebuilt install uninstall check

all: build

build:
	scripts/build-release.sh

# The release build already made (PREBUILT=1): its folder and manual pages must be there.
prebuilt:
	@test -f .build/release-path && test -f "$(BIN)/libkeychain-pkcs11.so" && test -f .build/man/keychainctl.1 \
	    || { echo "PREBUILT=1: no release build (run scripts/build-release.sh first)" >&2; exit 1; }

install: $(if $(PREBUILT),prebuilt,build)
	@# Record the missing directories above each file, below PREFIX, before creating them.
	@if [ -z "$(DESTDIR)" ]; then \
	    for f in $(FILES); do d=$$(dirname "$$f"); \
	        while [ ! -d "$$d" ] && [ "$$d" != "$(PREFIX)" ]; do echo "$$d"; d=$$(dirname "$$d"); done; \
	    done > .build/created-dirs; \
	    [ -f "$(CREATED)" ] && cat "$(CREATED)" >> .build/created-dirs; \
	    LC_ALL=C sort -ru .build/created-dirs -o .build/created-dirs; \
	fi
	install -D -m 0644 "$(BIN)/libkeychain-pkcs11.so" "$(DESTDIR)$(MODULE)"
	install -D -m 0755 "$(BIN)/keychainctl" "$(DESTDIR)$(BINDIR)/keychainctl"
	install -D -m 0755 "$(BIN)/keychaind" "$(DESTDIR)$(BINDIR)/keychaind"
	install -D -m 0644 packaging/systemd/keychaind.socket "$(DESTDIR)$(SYSTEMDUSERDIR)/keychaind.socket"
	sed 's|@BINDIR@|$(BINDIR)|' packaging/systemd/keychaind.service.in > .build/keychaind.service
	install -D -m 0644 .build/keychaind.service "$(DESTDIR)$(SYSTEMDUSERDIR)/keychaind.service"
	gcc -Wall -Wextra -O2 -D_FORTIFY_SOURCE=2 -fstack-protector-strong -shared -fPIC -Wl,-z,relro,-z,now -DKEYCHAINCTL_PATH='"$(BINDIR)/keychainctl"' pam/pam_keychain.c -o .build/pam_keychain.so -lpam
	install -D -m 0644 .build/pam_keychain.so "$(DESTDIR)$(PAMDIR)/pam_keychain.so"
	install -D -m 0644 Include/keychain-pkcs11.h "$(DESTDIR)$(INCLUDEDIR)/keychain-pkcs11.h"
	sed 's|^module:.*|module: $(MODULE)|' pkcs11/keychain-pkcs11.module > .build/keychain-pkcs11.module
	install -D -m 0644 .build/keychain-pkcs11.module "$(DESTDIR)$(P11KITDIR)/keychain-pkcs11.module"
	for f in $(DOCS); do install -D -m 0644 "$$f" "$(DESTDIR)$(DOCDIR)/$$f" || exit 1; done
	$(if $(LICENSEFILES),install -D -m 0644 LICENSE "$(DESTDIR)$(DOCDIR)/LICENSE")
	$(if $(LICENSEFILES),install -D -m 0644 debian/copyright "$(DESTDIR)$(DOCDIR)/copyright")
	@# Shell completions, generated by the CLI just built (swift-argument-parser).
	mkdir -p .build/completions
	for shell in bash zsh fish; do \
	    "$(BIN)/keychainctl" --generate-completion-script $$shell > .build/completions/$$shell || exit 1; done
	@# bash-completion sources the file: no #! line.
	sed '1{/^#!/d}' .build/completions/bash > .build/completions/bash-sourced
	install -D -m 0644 .build/completions/bash-sourced "$(DESTDIR)$(BASHCOMPDIR)/keychainctl"
	install -D -m 0644 .build/completions/zsh "$(DESTDIR)$(ZSHCOMPDIR)/_keychainctl"
	install -D -m 0644 .build/completions/fish "$(DESTDIR)$(FISHCOMPDIR)/keychainctl.fish"
	@# Manual pages, generated from the command definitions by scripts/build-release.sh.
	install -D -m 0644 .build/man/keychainctl.1 "$(DESTDIR)$(MAN1DIR)/keychainctl.1"
	for page in $(MANPAGES); do install -m 0644 ".build/man/$$page" "$(DESTDIR)$(MAN1DIR)/$$page" || exit 1; done
	install -D -m 0644 packaging/man/keychaind.1 "$(DESTDIR)$(MAN1DIR)/keychaind.1"
	@if [ -z "$(DESTDIR)" ]; then install -m 0644 .build/created-dirs "$(CREATED)"; fi

# Files by name (never a recursive rm), then the directories install created, deepest first,
# each only if empty. The prefix itself is never removed.
uninstall:
	@dirs=""; [ -z "$(DESTDIR)" ] && [ -f "$(CREATED)" ] && dirs=$$(cat "$(CREATED)"); \
	for f in $(FILES) $(if $(DESTDIR),,$(CREATED)); do \
	    if [ -e "$(DESTDIR)$$f" ] || [ -L "$(DESTDIR)$$f" ]; then echo "rm $(DESTDIR)$$f"; rm -f "$(DESTDIR)$$f"; fi; \
	done; \
	for f in "$(DESTDIR)$(MAN1DIR)"/keychainctl.*.1; do \
	    if [ -f "$$f" ]; then echo "rm $$f"; rm -f "$$f"; fi; \
	done; \
	for d in $$dirs; do \
	    case "$$d" in "$(PREFIX)"|"$(PREFIX)/") continue ;; esac; \
	    [ -d "$$d" ] && rmdir "$$d" 2>/dev/null && echo "rmdir $$d"; \
	done; true

check:
	scripts/test.sh

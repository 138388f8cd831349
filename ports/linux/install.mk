# `make install PREFIX=... [DESTDIR=...]`: the core and the Linux port for
# other programs to build against (docs/install.md). Installs
#   include/colibri.h (with colibri_ota.h and colibri_expert_cache.h, which it includes),
#   include/colibri_linux.h
#   lib/libcolibri.{a,so*}, lib/libcolibri_linux.{a,so*}   (so: VERSION, MAJOR, plain)
#   lib/pkgconfig/colibri.pc, colibri-linux.pc             (relocatable: ${pcfiledir})
#   lib/cmake/colibri/colibriConfig.cmake, ...Version.cmake  (find_package(colibri))
#   bin/colibri-run
PREFIX      ?= /usr/local
DESTDIR     ?=
INSTALL     ?= install
INSTALL_IN  := ports/linux/install
I_INC        = $(DESTDIR)$(PREFIX)/include
I_LIB        = $(DESTDIR)$(PREFIX)/lib
I_BIN        = $(DESTDIR)$(PREFIX)/bin
SUBST_VERSION = sed -e 's/@VERSION@/$(COLIBRI_VERSION)/g' -e 's/@SO_MAJOR@/$(SO_MAJOR)/g'

install: host
	@case "$(PREFIX)" in /*) ;; *) echo "make install: PREFIX must be an absolute path, not '$(PREFIX)'"; exit 2;; esac
	$(INSTALL) -d $(I_INC) $(I_LIB)/pkgconfig $(I_LIB)/cmake/colibri $(I_BIN)
	$(INSTALL) -m 644 sdk/include/colibri.h sdk/include/colibri_ota.h sdk/include/colibri_expert_cache.h \
	    ports/linux/colibri_linux.h $(I_INC)/
	for lib in libcolibri libcolibri_linux; do \
	    $(INSTALL) -m 644 $(BUILD)/host/$$lib.a $(I_LIB)/ && \
	    $(INSTALL) -m 755 $(BUILD)/host/$$lib.so $(I_LIB)/$$lib.so.$(COLIBRI_VERSION) && \
	    ln -sf $$lib.so.$(COLIBRI_VERSION) $(I_LIB)/$$lib.so.$(SO_MAJOR) && \
	    ln -sf $$lib.so.$(SO_MAJOR) $(I_LIB)/$$lib.so || exit 1; \
	done
	$(INSTALL) -m 755 $(BUILD)/host/colibri-run $(I_BIN)/
	for f in colibri.pc colibri-linux.pc; do \
	    $(SUBST_VERSION) $(INSTALL_IN)/$$f.in > $(I_LIB)/pkgconfig/$$f || exit 1; done
	for f in colibriConfig.cmake colibriConfigVersion.cmake; do \
	    $(SUBST_VERSION) $(INSTALL_IN)/$$f.in > $(I_LIB)/cmake/colibri/$$f || exit 1; done

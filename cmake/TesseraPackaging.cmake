# What `cmake --install` puts where, and the two Debian packages CPack makes of it (packaging/build-deb.sh).
#
#   tessera-cli (component cli):
#   bin/tessera-cli                                       the headless commands (links no Qt, no libtorch)
#   share/man/man1/tessera-cli.1.gz                       its man page, generated from its --help texts
#   share/bash-completion/completions/tessera-cli         its bash completion, generated from the same
#   share/doc/tessera-cli/copyright                       the licence summary Debian packages carry
#
#   tessera (component workbench):
#   bin/tessera                                           the workbench, which runs the same commands too
#   share/applications/org.tessera.Tessera.desktop        the desktop entry
#   share/metainfo/org.tessera.Tessera.metainfo.xml       AppStream metadata
#   share/icons/hicolor/{scalable,NxN}/apps/…             the icon: the SVG and PNGs rendered from it
#   share/tessera/demo/                                   the demo checkpoint and its reference (resources/demo)
#   share/man/man1/tessera.1.gz                           the man page, generated from the --help texts
#   share/bash-completion/completions/tessera             bash completion, generated from the --help texts
#   share/doc/tessera/copyright                           the licence summary Debian packages carry
include(GNUInstallDirs)

set(TESSERA_ICON_SIZES 16 22 24 32 48 64 128 256 512)
set(TESSERA_GENERATED ${PROJECT_BINARY_DIR}/packaging)

# PNG icons rendered from the SVG at build time (Qt's SVG renderer, no display needed).
add_executable(tessera_render_icon packaging/tools/render_icon.cpp)
target_link_libraries(tessera_render_icon PRIVATE Qt6::Gui Qt6::Svg)
tessera_qt_defines(tessera_render_icon)
tessera_set_warnings(tessera_render_icon)
set(icon_outputs)
foreach(size ${TESSERA_ICON_SIZES})
  list(APPEND icon_outputs ${TESSERA_GENERATED}/icons/${size}x${size}/apps/org.tessera.Tessera.png)
endforeach()
add_custom_command(OUTPUT ${icon_outputs}
                   COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
                           $<TARGET_FILE:tessera_render_icon> ${PROJECT_SOURCE_DIR}/resources/icons/tessera.svg
                           ${TESSERA_GENERATED}/icons ${TESSERA_ICON_SIZES}
                   DEPENDS tessera_render_icon ${PROJECT_SOURCE_DIR}/resources/icons/tessera.svg
                   COMMENT "Rendering the PNG icons")

# The man page and the completion of each executable, from what it prints for --help.
set(TESSERA_CLI_DOCS)
foreach(program tessera-cli tessera)
  list(APPEND TESSERA_CLI_DOCS ${TESSERA_GENERATED}/${program}.1.gz ${TESSERA_GENERATED}/${program}.bash-completion)
  add_custom_command(OUTPUT ${TESSERA_GENERATED}/${program}.1.gz ${TESSERA_GENERATED}/${program}.bash-completion
                     COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
                             bash ${PROJECT_SOURCE_DIR}/packaging/gen-cli-docs.sh $<TARGET_FILE:${program}> ${TESSERA_GENERATED}
                     COMMAND gzip -9nf ${TESSERA_GENERATED}/${program}.1
                     DEPENDS ${program} ${PROJECT_SOURCE_DIR}/packaging/gen-cli-docs.sh
                     COMMENT "Generating the man page and bash completion from ${program} --help")
endforeach()
add_custom_target(tessera_desktop_files ALL DEPENDS ${icon_outputs} ${TESSERA_CLI_DOCS})

# Two packages from one build (CPack components):
#   cli        → tessera-cli: the headless executable, its man page and completion. No GUI library, so cluster
#                nodes install it alone to run a merge in parts.
#   workbench  → tessera: the workbench executable (which runs the same commands), desktop entry, AppStream
#                metadata, icons, demo, man page and completion; it depends on tessera-cli of the same version.
install(TARGETS tessera-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(FILES ${TESSERA_GENERATED}/tessera-cli.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT cli)
install(FILES ${TESSERA_GENERATED}/tessera-cli.bash-completion
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME tessera-cli COMPONENT cli)
install(FILES packaging/debian/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/tessera-cli COMPONENT cli)

install(TARGETS tessera RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT workbench)
install(FILES resources/linux/org.tessera.Tessera.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications
        COMPONENT workbench)
install(FILES resources/linux/org.tessera.Tessera.metainfo.xml DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo
        COMPONENT workbench)
install(FILES resources/icons/tessera.svg DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps
        RENAME org.tessera.Tessera.svg COMPONENT workbench)
install(DIRECTORY ${TESSERA_GENERATED}/icons/ DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor COMPONENT workbench)
install(DIRECTORY resources/demo/ DESTINATION ${CMAKE_INSTALL_DATADIR}/tessera/demo COMPONENT workbench)
install(FILES ${TESSERA_GENERATED}/tessera.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT workbench)
install(FILES ${TESSERA_GENERATED}/tessera.bash-completion DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME tessera COMPONENT workbench)
install(FILES packaging/debian/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/tessera COMPONENT workbench)

# The Debian packages. Run-time dependencies come from dpkg-shlibdeps over each package's executable: for
# tessera-cli only libc, libstdc++, libgcc and RE2's libre2-9; for tessera Qt 6 Widgets, Gui with its xcb and
# offscreen platform plugins, Svg with its icon engine, PrintSupport, Concurrent, QCustomPlot and RE2. Nothing for
# building, and no libtorch, which neither executable links.
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli workbench)
set(CPACK_COMPONENT_WORKBENCH_DEPENDS cli)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON) # the workbench's Depends: tessera-cli (= the same version)
set(CPACK_PACKAGE_NAME tessera)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME tessera-cli)
set(CPACK_DEBIAN_WORKBENCH_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Tessera developers <tessera@localhost>")
# Each package's description begins with its own summary line. CPack would put one shared summary above both,
# except when the summary is its default text, which is therefore set here (packaging/check-deb.sh checks the
# summaries differ).
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(tessera_about
    "Tessera turns the shards of a distributed LLM training run (verl FSDP/FSDP2,
PyTorch DCP, Megatron legacy and torch_dist) into a complete, bit-exact
Hugging Face safetensors model, streaming with bounded memory, and shows why
when it can't. It also splits a model back into those layouts.
.")
set(CPACK_DEBIAN_CLI_DESCRIPTION
    "distributed training checkpoints to Hugging Face models (command line)
${tessera_about}
This package holds the command line alone, tessera-cli, with its man page and
bash completion. It needs no display and no GUI library, so cluster nodes can
install it to run a merge in parts (--part auto under Slurm, mpirun or a
Kubernetes indexed Job). The workbench is in the package tessera.")
set(CPACK_DEBIAN_WORKBENCH_DESCRIPTION
    "distributed training checkpoints to Hugging Face models (workbench)
${tessera_about}
This package holds the Qt workbench, tessera, which also runs every command
of tessera-cli, with its man page, bash completion and desktop entry, and a
small demo checkpoint to try them on.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Reading the man page and completing on Tab need these, which a minimal system lacks. Wayland sessions get a
# native window with qt6-wayland, but it brings Qt Quick and a compositor along; without it Qt uses XWayland.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "man-db, bash-completion")
set(CPACK_DEBIAN_WORKBENCH_PACKAGE_SUGGESTS "qt6-wayland")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)

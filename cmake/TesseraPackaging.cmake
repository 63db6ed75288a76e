# What `cmake --install` puts where, and the Debian package CPack makes of it (packaging/build-deb.sh).
#
#   bin/tessera                                           the one executable (it does not link libtorch)
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

# The man page and the completion, from what the built executable prints for --help.
add_custom_command(OUTPUT ${TESSERA_GENERATED}/tessera.1.gz ${TESSERA_GENERATED}/tessera.bash-completion
                   COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
                           bash ${PROJECT_SOURCE_DIR}/packaging/gen-cli-docs.sh $<TARGET_FILE:tessera> ${TESSERA_GENERATED}
                   COMMAND gzip -9nf ${TESSERA_GENERATED}/tessera.1
                   DEPENDS tessera ${PROJECT_SOURCE_DIR}/packaging/gen-cli-docs.sh
                   COMMENT "Generating the man page and bash completion from tessera --help")
add_custom_target(tessera_desktop_files ALL DEPENDS ${icon_outputs} ${TESSERA_GENERATED}/tessera.1.gz
                                                    ${TESSERA_GENERATED}/tessera.bash-completion)

install(TARGETS tessera RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES resources/linux/org.tessera.Tessera.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
install(FILES resources/linux/org.tessera.Tessera.metainfo.xml DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)
install(FILES resources/icons/tessera.svg DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps
        RENAME org.tessera.Tessera.svg)
install(DIRECTORY ${TESSERA_GENERATED}/icons/ DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor)
install(DIRECTORY resources/demo/ DESTINATION ${CMAKE_INSTALL_DATADIR}/tessera/demo)
install(FILES ${TESSERA_GENERATED}/tessera.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${TESSERA_GENERATED}/tessera.bash-completion DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME tessera)
install(FILES packaging/debian/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/tessera)

# The Debian package. Run-time dependencies come from dpkg-shlibdeps over the installed executable (Qt 6 Widgets,
# Gui with its xcb and offscreen platform plugins, Svg with its icon engine, PrintSupport, Concurrent,
# QCustomPlot, RE2's libre2-9); nothing for building, and no libtorch, which the executable does not link.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Tessera developers <tessera@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed training checkpoints to Hugging Face models, and back")
# The long description; CPack puts the summary above it as the first line.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "Tessera turns the shards of a distributed LLM training run (verl FSDP/FSDP2,
PyTorch DCP, Megatron legacy and torch_dist) into a complete, bit-exact
Hugging Face safetensors model, streaming with bounded memory, and shows why
when it can't. It also splits a model back into those layouts.
.
This package holds the Qt workbench, the tessera command line with its man
page and bash completion, and a small demo checkpoint to try them on.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Reading the man page and completing on Tab need these, which a minimal system lacks. Wayland sessions get a
# native window with qt6-wayland, but it brings Qt Quick and a compositor along; without it Qt uses XWayland.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "man-db, bash-completion")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "qt6-wayland")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)

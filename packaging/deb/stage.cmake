# Run by CPack (CPACK_PRE_BUILD_SCRIPTS) on its staging root, after the project's install and
# before the .deb is made; never by `cmake --install`. What only the Debian package has:
#  - /etc/assay/assayd.yaml, the example configuration, a conffile (packaging/deb/conffiles):
#    dpkg keeps the operator's edits across upgrades; postinst makes it root:assay 0640;
#  - /usr/share/doc/assay/copyright and changelog.Debian.gz;
#  - manual pages for assayd and assay, made of their --help (so they never disagree with it);
#  - binaries without their .comment and .note sections (as dh_strip leaves them);
#  - lintian overrides (packaging/deb/lintian-overrides).
set(src "${CPACK_ASSAY_SOURCE_DIR}")
set(root "${CPACK_TEMPORARY_INSTALL_DIRECTORY}")
if(NOT src OR NOT root)
  message(FATAL_ERROR "stage.cmake: run by cpack only (CPACK_ASSAY_SOURCE_DIR, staging root)")
endif()
set(usr "${root}${CPACK_PACKAGING_INSTALL_PREFIX}")
set(doc "${usr}/share/doc/assay")
set(readable OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

function(gzip_to input output)  # gzip -9n: maximal compression, no name or time stamp
  execute_process(COMMAND gzip -9nc "${input}" OUTPUT_FILE "${output}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "stage.cmake: gzip ${input} failed (${rc})")
  endif()
  file(CHMOD "${output}" PERMISSIONS ${readable})
endfunction()

set(overrides "${usr}/share/lintian/overrides")
file(MAKE_DIRECTORY "${root}/etc/assay" "${doc}" "${usr}/share/man/man1" "${overrides}")
file(COPY_FILE "${src}/config/assayd.example.yaml" "${root}/etc/assay/assayd.yaml")
file(COPY_FILE "${src}/packaging/deb/copyright" "${doc}/copyright")
file(COPY_FILE "${src}/packaging/deb/lintian-overrides" "${overrides}/assay")
file(CHMOD "${root}/etc/assay/assayd.yaml" "${doc}/copyright" "${overrides}/assay"
     PERMISSIONS ${readable})

# The changelog's first entry names the package's version: a new version needs a new entry.
file(STRINGS "${src}/packaging/deb/changelog" top LIMIT_COUNT 1)
set(version "${CPACK_PACKAGE_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
if(NOT top MATCHES "^assay \\(${version}\\) ")
  message(FATAL_ERROR "packaging/deb/changelog starts with '${top}', not with the package's "
                      "version ${version}: add an entry for it")
endif()
gzip_to("${src}/packaging/deb/changelog" "${doc}/changelog.Debian.gz")

foreach(program assayd assay)
  set(binary "${usr}/bin/${program}")
  execute_process(COMMAND "${CPACK_ASSAY_STRIP}" --remove-section=.comment --remove-section=.note
                          "${binary}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "stage.cmake: ${CPACK_ASSAY_STRIP} ${binary} failed (${rc})")
  endif()
  execute_process(COMMAND "${binary}" --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR help STREQUAL "")
    message(FATAL_ERROR "stage.cmake: ${binary} --help failed (${rc})")
  endif()
  # roff: backslashes escaped, options' hyphens as minus signs, no line starting a request.
  string(REPLACE "\\" "\\e" help "${help}")
  string(REPLACE "-" "\\-" help "${help}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
  if(program STREQUAL "assayd")
    set(name "judge a sample of a RAG service's Kafka events; export Prometheus metrics")
    # One string: set() with several arguments makes a list, joined with ';' in the page.
    string(CONCAT files ".TP\n/etc/assay/assayd.yaml\nthe configuration the systemd unit runs with\n"
                        ".TP\n/usr/lib/systemd/system/assayd.service\nthe unit (systemctl edit assayd to change it)\n"
                        ".TP\n/var/lib/assay\nthe service's state directory (judgments.jsonl by default)\n")
  else()
    set(name "report on, calibrate and price the judges of assayd offline")
    set(files ".TP\n/usr/share/assay\nPrometheus alert rules and a Grafana dashboard\n")
  endif()
  string(TOUPPER "${program}" title)
  string(JOIN "" page
    ".TH ${title} 1 \"\" \"assay ${CPACK_PACKAGE_VERSION}\" \"User Commands\"\n"
    ".SH NAME\n${program} \\- ${name}\n"
    ".SH SYNOPSIS AND OPTIONS\n"
    "The output of \\fB${program} \\-\\-help\\fR:\n.PP\n.nf\n${help}.fi\n"
    ".SH FILES\n${files}"
    ".SH SEE ALSO\n"
    "/usr/share/doc/assay/README.md and /usr/share/doc/assay/docs/ (configuration.md: every "
    "key and the systemd unit; metrics.md; alerting.md; events.md; calibration.md)\n")
  file(WRITE "${root}/${program}.1" "${page}")
  gzip_to("${root}/${program}.1" "${usr}/share/man/man1/${program}.1.gz")
  file(REMOVE "${root}/${program}.1")
endforeach()

// SwiftPM builds a C target from at least one source file; the header is the
// whole of this target (libFuzzer itself comes from the toolchain's runtime).

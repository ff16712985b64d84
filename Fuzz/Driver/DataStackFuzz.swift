#if FUZZING
import CLibFuzzer
#endif
import FuzzTargets
import Foundation

/// `DataStackFuzz`: the fuzz targets' command line (see Fuzz/README.md).
///
/// ```
/// DataStackFuzz list
/// DataStackFuzz seed TARGET FIXTURES OUT    write TARGET's seeds from FIXTURES into OUT
/// DataStackFuzz replay TARGET FILE…         run each file once; print what each threw
/// DataStackFuzz fuzz TARGET [libFuzzer flags and corpus folders]   (a -DFUZZING build)
/// ```
@main
struct DataStackFuzz {
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        guard let command = arguments.first else { usage() }
        arguments.removeFirst()
        switch command {
        case "list":
            for target in FuzzTarget.all { print("\(target.name)\t\(target.summary)") }
        case "seed":
            guard arguments.count == 3 else { usage() }
            seed(target(arguments[0]), fixtures: URL(fileURLWithPath: arguments[1]), into: URL(fileURLWithPath: arguments[2]))
        case "replay":
            guard arguments.count >= 2 else { usage() }
            let target = target(arguments[0])
            for path in arguments.dropFirst() { replay(target, path: path) }
        case "fuzz":
            guard !arguments.isEmpty else { usage() }
            fuzz(target(arguments[0]), libFuzzerArguments: Array(arguments.dropFirst()))
        default:
            usage()
        }
    }

    static func target(_ name: String) -> FuzzTarget {
        guard let target = FuzzTarget.named(name) else {
            fail("no fuzz target is called \(name); `DataStackFuzz list` names them")
        }
        return target
    }

    static func seed(_ target: FuzzTarget, fixtures: URL, into folder: URL) {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let seeds = try target.seeds(fromFixturesAt: fixtures)
            for (index, seed) in seeds.enumerated() {
                try seed.write(to: folder.appendingPathComponent(String(format: "seed-%04d", index)))
            }
            print("\(target.name): \(seeds.count) seeds in \(folder.path)")
        } catch {
            fail("\(target.name): cannot write seeds: \(error)")
        }
    }

    static func replay(_ target: FuzzTarget, path: String) {
        guard let input = FileManager.default.contents(atPath: path) else { fail("\(path): cannot be read") }
        do {
            try target.run(input)
            print("\(path): accepted")
        } catch {
            print("\(path): threw \(type(of: error)): \(error)")
        }
    }

    static func fuzz(_ target: FuzzTarget, libFuzzerArguments: [String]) -> Never {
        #if FUZZING
        FuzzEntry.target = target
        // libFuzzer reads flags (`-max_total_time=60`) and corpus folders from an
        // argv of its own; argv[0] stays the program's name.
        var argv: [UnsafeMutablePointer<CChar>?] = ([CommandLine.arguments[0]] + libFuzzerArguments).map { strdup($0) } + [nil]
        var argc = CInt(argv.count - 1)
        let status = argv.withUnsafeMutableBufferPointer { buffer in
            var base = buffer.baseAddress
            return LLVMFuzzerRunDriver(&argc, &base) { data, size in
                FuzzEntry.run(data, size)
            }
        }
        exit(status)
        #else
        fail("this DataStackFuzz was built without -sanitize=fuzzer -DFUZZING; run Fuzz/run instead")
        #endif
    }

    static func usage() -> Never {
        fail("""
            usage: DataStackFuzz list
                   DataStackFuzz seed TARGET FIXTURES OUT
                   DataStackFuzz replay TARGET FILE...
                   DataStackFuzz fuzz TARGET [libFuzzer flags] [CORPUS...]
            """)
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("DataStackFuzz: \(message)\n".utf8))
        exit(64)
    }
}

#if FUZZING
/// The one target a fuzzing process runs; libFuzzer's callback is a C function
/// pointer, which captures nothing, so the target waits here.
enum FuzzEntry {
    nonisolated(unsafe) static var target: FuzzTarget?

    static func run(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        let input = data.map { Data(bytes: $0, count: size) } ?? Data()
        // A thrown error is the right answer to bad input; only a trap, a hang
        // or a runaway allocation is a finding, and libFuzzer catches those.
        try? target?.run(input)
        return 0
    }
}
#endif

import Foundation
import Testing

/// The main package's `datastack` tool, run on a replica's file: the same
/// command a user runs (`datastack dump FILE --json --global-ids`), not a
/// reading of our own. It is the main package's product, built by its
/// `swift build` (CI builds the main package before this one).
enum DataStackTool {
    static var executable: URL {
        // Stores/PostgreSQL/Tests/DataStackPostgreSQLTests/Support/ → the repository.
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<6 { root.deleteLastPathComponent() }
        return root.appendingPathComponent(".build/debug/datastack")
    }

    /// Standard output of `datastack` with `arguments`; throws naming the
    /// exit status and standard error when it fails.
    static func run(_ arguments: [String]) throws -> String {
        try #require(FileManager.default.isExecutableFile(atPath: executable.path),
                     "build the datastack tool first: swift build --product datastack (at the repository's root)")
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Read before waiting: a dump larger than the pipe's buffer would block the tool.
        let text = output.fileHandleForReading.readDataToEndOfFile()
        let errorText = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ToolFailure(description: "datastack \(arguments.joined(separator: " ")) exited with \(process.terminationStatus): "
                              + String(decoding: errorText, as: UTF8.self))
        }
        return String(decoding: text, as: UTF8.self)
    }

    struct ToolFailure: Error, CustomStringConvertible {
        var description: String
    }
}

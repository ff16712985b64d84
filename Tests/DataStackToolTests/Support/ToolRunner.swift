import Foundation
import Testing

/// What one run of the `datastack` executable did.
struct ToolResult {
    let status: Int32
    let output: String
    let errorOutput: String

    /// Standard output's lines, without the empty last one.
    var lines: [String] { output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }

    /// Each line of standard output parsed as a JSON object (JSON Lines).
    func jsonLines() throws -> [[String: Any]] {
        try lines.map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
        }
    }

    /// Standard output parsed as one JSON object.
    func jsonObject() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "not a JSON object: \(output)")
    }
}

/// Runs the built `datastack` executable, the product the package builds next
/// to this test bundle (`swift build --build-tests` or `swift test` builds both).
enum Tool {
    /// The executable: beside the test bundle's executable in the build
    /// products folder, or else in `.build/debug` of the package.
    static let executable: URL = {
        let fileManager = FileManager.default
        var candidates: [URL] = []
        if let bundle = Bundle.main.executableURL {
            candidates.append(bundle.deletingLastPathComponent().appendingPathComponent("datastack"))
        }
        for bundle in Bundle.allBundles {
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("datastack"))
        }
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(packageRoot.appendingPathComponent(".build/debug/datastack"))
        return candidates.first { fileManager.isExecutableFile(atPath: $0.path) } ?? candidates[candidates.count - 1]
    }()

    /// Runs `datastack arguments…`, its output in files so that a large dump
    /// never blocks on a full pipe.
    static func run(_ arguments: [String]) throws -> ToolResult {
        let workspace = try ToolWorkspace()
        let outputURL = workspace.url.appendingPathComponent("stdout")
        let errorURL = workspace.url.appendingPathComponent("stderr")
        try Data().write(to: outputURL)
        try Data().write(to: errorURL)
        let output = try FileHandle(forWritingTo: outputURL)
        let error = try FileHandle(forWritingTo: errorURL)
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try output.close()
        try error.close()
        return ToolResult(status: process.terminationStatus,
                          output: try String(contentsOf: outputURL, encoding: .utf8),
                          errorOutput: try String(contentsOf: errorURL, encoding: .utf8))
    }
}

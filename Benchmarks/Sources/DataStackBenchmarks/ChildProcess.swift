import Foundation

/// This benchmark program run again as a child process, for the tasks that
/// measure a process of their own (peak memory) or a second process (history).
enum ChildProcess {
    /// Runs this executable with `arguments` without blocking the calling
    /// thread (the main queue may have merges to run meanwhile); returns its
    /// exit status and standard output.
    static func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // The pipe is drained on another thread, so a long report cannot fill it and stall the child.
        let reader = Task.detached { output.fileHandleForReading.readDataToEndOfFile() }
        while process.isRunning { try await Task.sleep(for: .milliseconds(10)) }
        return (process.terminationStatus, String(decoding: await reader.value, as: UTF8.self))
    }

    /// Runs the child and returns the fields of its last line starting with
    /// `prefix` (the prefix itself first), which must have `count` fields.
    static func report(_ arguments: [String], prefix: String, fields count: Int, task: String) async throws -> [Substring] {
        let (status, text) = try await run(arguments)
        guard status == 0, let line = text.split(separator: "\n").last(where: { $0.hasPrefix(prefix + " ") }) else {
            throw BenchError("\(task): the child \(arguments.dropFirst().joined(separator: " ")) exited with \(status): \(text)")
        }
        let fields = line.split(separator: " ")
        guard fields.count == count else { throw BenchError("\(task): cannot read the child's report `\(line)`") }
        return fields
    }
}

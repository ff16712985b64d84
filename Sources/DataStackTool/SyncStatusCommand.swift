import DataStackSync
import Foundation

/// `datastack sync-status FILE [--json]`: what a replica's store file says
/// about its sync — its ID, the last hub sequence it applied, the local
/// changes waiting to be pushed — read-only, while the app may run.
struct SyncStatusCommand: ToolCommand {
    let file: URL
    let json: Bool

    init(_ arguments: [String]) throws {
        let parsed = try Arguments(arguments, flags: ["--json"], options: [])
        file = storeURL(try parsed.file())
        json = parsed.flags.contains("--json")
    }

    func run() throws {
        guard FileManager.default.fileExists(atPath: file.path) else {
            throw ToolError(.noInput, "\(file.path): no store file exists at this location")
        }
        let summary: SyncReplicaSummary?
        do {
            summary = try SyncReplicaSummary.read(storeAt: file)
        } catch {
            throw ToolError(.dataError, "\(error)")
        }
        guard let summary else {
            throw ToolError(.dataError, "\(file.path): not a replica (the store has no sync tables; it never synced)")
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            Output.standard.write(String(decoding: try encoder.encode(summary), as: UTF8.self))
            return
        }
        let clock = summary.clockMilliseconds == 0 ? "never stamped" :
            Date(timeIntervalSince1970: Double(summary.clockMilliseconds) / 1000).formatted(.iso8601)
        Output.standard.write("""
            replica          \(summary.replica.uuidString)
            pulled through   hub sequence \(summary.pulledSequence)
            scanned through  local transaction \(summary.scannedTransaction)
            changes          \(summary.recordedChanges) recorded, \(summary.pendingChanges) waiting to be pushed
            objects          \(summary.objects) with a global ID, \(summary.objectsWithoutRow) of them deleted here
            clock            \(clock)
            """)
    }
}

import Foundation
import DataStack

/// `datastack inspect FILE [--json] [--model PATH]`: the store's metadata,
/// its model, each entity's object count and a summary of its persistent history.
struct InspectCommand: ToolCommand {
    let file: URL
    let json: Bool
    let modelPath: String?

    init(_ arguments: [String]) throws {
        let parsed = try Arguments(arguments, flags: ["--json"], options: ["--model"])
        file = storeURL(try parsed.file())
        json = parsed.flags.contains("--json")
        modelPath = parsed.values["--model"]
    }

    func run() throws {
        let opened = try OpenedStore(file, modelPath: modelPath, tracksHistory: true)
        let metadata = StoreSummary(opened.coordinator.metadata(for: opened.store))
        let entities = try EntityCount.counts(in: opened)
        let history = try HistorySummary(opened)
        if json {
            Output.standard.write(try JSONText.pretty([
                "file": file.path,
                "metadata": metadata.json,
                "model": [
                    "source": opened.source.kind,
                    "path": opened.source.path.map { $0 as Any } ?? NSNull(),
                    "entities": entities.map(\.json),
                ] as [String: Any],
                "history": history?.json ?? NSNull(),
            ] as [String: Any]))
        } else {
            writeText(metadata: metadata, source: opened.source, entities: entities, history: history)
        }
    }

    private func writeText(metadata: StoreSummary, source: ModelSource, entities: [EntityCount], history: HistorySummary?) {
        let out = Output.standard
        let header: [[String]] = [
            ["store", file.path], ["type", metadata.storeType], ["uuid", metadata.uuid],
            ["framework", metadata.frameworkVersion.map(String.init) ?? "-"],
            ["identifiers", ValueFormat.text(metadata: metadata.versionIdentifiers)],
            ["model", source.description],
            ["history", history?.text ?? "none"],
        ]
        TextTable.lines(header).forEach(out.write)
        out.write("")
        let rows = [["entity", "parent", "attributes", "relationships", "objects"]] + entities.map {
            [$0.name, $0.parent ?? "-", String($0.attributes), String($0.relationships), String($0.objects)]
        }
        TextTable.lines(rows).forEach(out.write)
        if !metadata.versionHashes.isEmpty {
            out.write("")
            out.write("model version hashes")
            TextTable.lines(metadata.versionHashes.keys.sorted().map { [$0, metadata.versionHashes[$0]?.base64EncodedString() ?? ""] },
                            indent: "  ").forEach(out.write)
        }
        if !metadata.custom.isEmpty {
            out.write("")
            out.write("custom metadata")
            TextTable.lines(metadata.custom.keys.sorted().map { [$0, ValueFormat.text(metadata: metadata.custom[$0] ?? "")] },
                            indent: "  ").forEach(out.write)
        }
    }
}

import DataStack
import Foundation
import Synchronization

/// The output of `--import-only`: one line per importer save, and a last line
/// when the run stops.
///
/// A line is written only after its save returned, so every line stands for
/// a save that is on disk: a process killed at any moment has reported a
/// prefix of what its store holds (at most one save more is on disk than
/// reported). With `--json` each line is one object:
///
/// ```
/// {"final":false,"imported":104,"inserted":50,"saved":2,"savedAt":1754312345.678,"stockUpdates":50,"updated":24}
/// ```
///
/// `saved` is the save's number in this run, `inserted` and `updated` the
/// objects it wrote, `stockUpdates` and `imported` the totals of the run so
/// far (the keys mean what they mean in the watchlist's lines, so a
/// `--view-only` process that saw the whole run ends with the same totals),
/// and `savedAt` when the save returned, in seconds since 1970. With
/// `--keep-updates` a line is written once the save's trim ran too, and
/// `trimmed` says how many old updates it deleted (0 when the trim failed: the
/// error is on stderr, and the next trim deletes what this one left). The
/// last line has `"final": true`, the totals, and `"error"` when a save failed.
final class SaveLog: Sendable {
    private struct Totals {
        var saves = 0
        var imported = 0
        var stockUpdates = 0
        /// The import loop's running totals at its last save, to tell one save's counts from them.
        var loopInserted = 0
        var loopUpdated = 0
    }

    private struct Line: Encodable {
        var saved: Int
        /// Nil on the final line, which stands for no save.
        var inserted: Int?
        var updated: Int?
        var stockUpdates: Int
        var imported: Int
        var savedAt: Double?
        /// Old updates the trim after this save deleted; nil without `--keep-updates`.
        var trimmed: Int?
        /// With `--sync`: the engine's line (``TickerSync/Snapshot``); absent without it.
        var sync: TickerSync.Snapshot?
        var final: Bool
        var error: String?
    }

    private let json: Bool
    private let totals = Mutex(Totals())
    /// `--sync`: asked at every line; nil without the flag.
    private let sync: TickerSync?

    init(json: Bool, sync: TickerSync? = nil) {
        self.json = json
        self.sync = sync
    }

    /// Reports the save that created the market's companies (or filled in what
    /// an older store lacked); a run on a store that has them saves nothing there.
    func recordListingSave(inserted: Int, updated: Int) {
        record { _ in (inserted, updated, 0) }
    }

    /// Reports the import loop's latest save, from the loop's running progress,
    /// and how many old updates the trim after it deleted (nil without `--keep-updates`).
    func recordImportSave(_ progress: ImportProgress, trimmed: Int? = nil) {
        record(trimmed: trimmed) { totals in
            let inserted = progress.insertedObjects - totals.loopInserted
            let updated = progress.updatedObjects - totals.loopUpdated
            totals.loopInserted = progress.insertedObjects
            totals.loopUpdated = progress.updatedObjects
            // Each quote of the feed inserts one stock update.
            return (inserted, updated, inserted)
        }
    }

    /// Writes the last line; `failure` says why the run stopped, nil when it was asked to.
    func finish(failure: String?) {
        let totals = totals.withLock { $0 }
        if json {
            write(Line(saved: totals.saves, stockUpdates: totals.stockUpdates, imported: totals.imported, sync: sync?.snapshot,
                       final: true, error: failure))
        } else {
            if let sync { write(sync.snapshot.line) }
            write(failure.map { "failed after \(totals.saves) saves: \($0)" }
                ?? "stopped: \(totals.imported) objects imported in \(totals.saves) saves (\(totals.stockUpdates) stock updates).")
        }
    }

    /// Counts one save — `counts` gives its inserted and updated objects and
    /// stock updates — and writes its line, under the lock so that lines come
    /// out in the order of the saves.
    private func record(trimmed: Int? = nil, _ counts: (inout Totals) -> (inserted: Int, updated: Int, stockUpdates: Int)) {
        totals.withLock { totals in
            let save = counts(&totals)
            totals.saves += 1
            totals.imported += save.inserted + save.updated
            totals.stockUpdates += save.stockUpdates
            let savedAt = Date().timeIntervalSince1970
            if json {
                write(Line(saved: totals.saves, inserted: save.inserted, updated: save.updated, stockUpdates: totals.stockUpdates,
                           imported: totals.imported, savedAt: savedAt, trimmed: trimmed, sync: sync?.snapshot, final: false))
            } else {
                write("save \(totals.saves) on disk: \(save.inserted) inserted, \(save.updated) updated"
                      + " · \(totals.imported) objects, \(totals.stockUpdates) stock updates so far"
                      + (trimmed.map { " · \($0) old updates deleted" } ?? ""))
            }
        }
    }

    private func write(_ line: Line) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding fails only on a non-finite number, which no count or time here can be.
        guard let data = try? encoder.encode(line) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    private func write(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }
}

import DataStack
import Observation

/// Which watched companies changed since the last frame, as the Observation
/// framework tells it: the view model a SwiftUI screen would hold, drawn here
/// by ``WatchlistView`` (a changed row is marked, and `--json` lines list
/// them as `changed`).
///
/// Each watched company's row is read inside `withObservationTracking`, so
/// the properties the row shows are tracked on that company. A merge — of
/// this process's importer or of another process's save — that changes one
/// of them calls `onChange` for that company alone, on the main queue, before
/// the stack posts the merge; a company the merge did not change is not
/// reported, however many objects the save holds. A property the row does not
/// show (`sector`) changing reports nothing either.
// @unchecked Sendable: touched only on the main queue (the main context's), as WatchlistView is;
// `onChange` runs there too, on the thread that merges.
@Observable
final class WatchlistModel: @unchecked Sendable {
    /// Symbols of watched companies whose shown values changed since ``takeChangedSymbols()``.
    private(set) var changedSymbols: Set<String> = []
    /// Symbols whose tracking is registered and has not fired: read again
    /// without a new tracking, so that one change is reported once.
    @ObservationIgnored private var tracked: Set<String> = []

    /// Reads a company's row, tracking the properties it reads unless a
    /// tracking of the company is already waiting.
    func row(of company: Company) -> WatchlistView.Row {
        let symbol = company.symbol
        guard tracked.insert(symbol).inserted else { return WatchlistView.Row(company) }
        return withObservationTracking {
            WatchlistView.Row(company)
        } onChange: { [weak self] in
            self?.noteChange(of: symbol)
        }
    }

    /// The symbols changed since the last call, in no order; starts counting again.
    func takeChangedSymbols() -> Set<String> {
        defer { changedSymbols = [] }
        return changedSymbols
    }

    private func noteChange(of symbol: String) {
        tracked.remove(symbol)
        changedSymbols.insert(symbol)
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs code on a thread with a small stack, as a Dispatch worker has, and
/// says how much of that stack it used.
///
/// The stack is memory of our own, filled with a pattern before the thread
/// starts and guarded by an inaccessible page below it, so an overflow is a
/// SIGSEGV (never a silent write into the heap) and the deepest byte the
/// pattern lost is the most the code used. Tests of nesting limits run their
/// deepest inputs here: a limit that holds on the main thread's 8 MiB but not
/// on a worker's 512 KiB would still let one string kill a server.
enum SmallStackThread {
    /// The stack a Dispatch worker thread gets on Linux.
    static let workerStackBytes = 512 * 1024

    /// Runs `body` on a new thread with a `stackBytes` stack, waits for it,
    /// and returns its result with the bytes of stack the thread used.
    ///
    /// `body` need not be `Sendable`: the caller waits for the thread, so the
    /// two never run at once.
    @discardableResult
    static func run<T>(stackBytes: Int = workerStackBytes, _ body: () -> T) -> (value: T, stackBytesUsed: Int) {
        withoutActuallyEscaping(body) { body in run(stackBytes: stackBytes, escaping: body) }
    }

    private static func run<T>(stackBytes: Int, escaping body: @escaping () -> T) -> (value: T, stackBytesUsed: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let size = (stackBytes + page - 1) / page * page
        guard let mapping = mmap(nil, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              mapping != MAP_FAILED else { fatalError("mmap failed: \(errno)") }
        defer { munmap(mapping, size + page) }
        // The lowest page is the guard: the stack grows down into it.
        mprotect(mapping, page, PROT_NONE)
        let stack = mapping + page
        memset(stack, 0xA5, size)

        var result: T?
        let box = SmallStackThreadBox { result = body() }
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstack(&attributes, stack, size)
        #if canImport(Glibc)
        var thread = pthread_t()
        #else
        var thread: pthread_t?
        #endif
        let context = Unmanaged.passRetained(box).toOpaque()
        let created = pthread_create(&thread, &attributes, { context in
            Unmanaged<SmallStackThreadBox>.fromOpaque(context!).takeRetainedValue().body()
            return nil
        }, context)
        precondition(created == 0, "pthread_create failed: \(created)")
        #if canImport(Glibc)
        pthread_join(thread, nil)
        #else
        pthread_join(thread!, nil)
        #endif

        let bytes = stack.assumingMemoryBound(to: UInt8.self)
        var untouched = 0
        while untouched < size, bytes[untouched] == 0xA5 { untouched += 1 }
        return (result!, size - untouched)
    }
}

/// What ``SmallStackThread`` hands its thread: the code, which stores its
/// result where the caller reads it after the join.
private final class SmallStackThreadBox {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

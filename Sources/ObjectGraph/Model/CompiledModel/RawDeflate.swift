import CZlib
import Foundation

/// Raw DEFLATE data (RFC 1951, no zlib or gzip header) through the system's
/// zlib: the form in which Core Data keeps a store's model in
/// `Z_MODELCACHE.Z_CONTENT`.
package enum RawDeflate {
    /// The most bytes ``inflate(_:limit:)`` produces by default: 16 MiB.
    ///
    /// NoteStore's model cache, the largest of the fixtures' 27, inflates to
    /// 74,787 bytes (from 36,773: real caches compress about 2:1), so the limit
    /// is 224 times that. DEFLATE itself cannot expand more than 1,032:1, so an
    /// input needs 16 KiB to reach the limit, and what it inflates to stays small
    /// enough for ``BinaryPropertyList`` to read or refuse in well under a second.
    package static let maximumInflatedSize = 16 << 20
    /// A compressed stream that zlib cannot inflate, or that inflates past the limit.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// The inflated bytes of `data`.
    ///
    /// - Parameter limit: the most bytes the result may hold (see
    ///   ``maximumInflatedSize``), so a damaged or hostile blob that would
    ///   inflate to gigabytes stops there.
    /// - Throws: ``Failure`` when the stream is damaged, ends early, or is longer than `limit`.
    package static func inflate(_ data: Data, limit: Int = maximumInflatedSize) throws(Failure) -> Data {
        if data.isEmpty { throw Failure(description: "the compressed data is empty") }
        // zlib counts input in 32 bits; SQLite's blobs stop at 2 GiB, so only a caller's own data gets here.
        guard data.count <= Int(uInt.max) else {
            throw Failure(description: "the compressed data (\(data.count) bytes) is larger than zlib takes in one piece")
        }
        var stream = z_stream()
        let started = czlib_inflate_init_raw(&stream)
        guard started == Z_OK else {
            throw Failure(description: "zlib could not start inflating (\(String(cString: zError(started))))")
        }
        defer { inflateEnd(&stream) }

        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var input = data
        let failure: String? = input.withUnsafeMutableBytes { source in
            stream.next_in = source.baseAddress?.assumingMemoryBound(to: Bytef.self)
            stream.avail_in = uInt(source.count)
            while true {
                let status = chunk.withUnsafeMutableBytes { buffer in
                    stream.next_out = buffer.baseAddress?.assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = uInt(buffer.count)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                if output.count + produced > limit { return "the data inflates to more than \(limit) bytes" }
                output.append(contentsOf: chunk[0..<produced])
                switch status {
                case Z_STREAM_END:
                    return nil
                case Z_OK where produced == 0 && stream.avail_in == 0, Z_BUF_ERROR:
                    return "the compressed data ends early (after \(data.count) bytes)"
                case Z_OK:
                    continue
                default:
                    let reason = stream.msg.map { String(cString: $0) } ?? String(cString: zError(status))
                    return "the compressed data is damaged near byte \(stream.total_in): \(reason)"
                }
            }
        }
        if let failure { throw Failure(description: failure) }
        return output
    }

    /// `data` compressed at zlib's default level.
    ///
    /// - Throws: ``Failure`` when zlib cannot start (out of memory) or fails.
    package static func deflate(_ data: Data) throws(Failure) -> Data {
        var stream = z_stream()
        let started = czlib_deflate_init_raw(&stream, Z_DEFAULT_COMPRESSION)
        guard started == Z_OK else {
            throw Failure(description: "zlib could not start compressing (\(String(cString: zError(started))))")
        }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(data.count))))
        var input = data
        let status = input.withUnsafeMutableBytes { source in
            output.withUnsafeMutableBytes { target in
                stream.next_in = source.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(target.count)
                return CZlib.deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else {
            throw Failure(description: "zlib could not compress the data (\(String(cString: zError(status))))")
        }
        return Data(output.prefix(Int(stream.total_out)))
    }
}

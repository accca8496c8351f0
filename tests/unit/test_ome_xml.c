/* test_ome_xml.c — the OME-XML parser (src/formats/ome_xml.c) on documents written here: what it
 * keeps (sizes, DimensionOrder, channels, TiffData, UUIDs, objectives), unit conversion, plane to
 * IFD mapping under every DimensionOrder and TiffData form, the single-file check, entities and
 * the other XML constructs, and hostile input (malformed, truncated at every byte, deeply
 * nested, huge names, attributes and counts, random mutations) that must give clean errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ome_xml.h"
#include "unit.h"

#define NS "http://www.openmicroscopy.org/Schemas/OME/2016-06"

static sp_status parse(const char *text, sp_ome **out, sp_err *err) {
    sp_limits limits;
    sp_limits_default(&limits);
    sp_err_clear(err);
    return sp_ome_parse(text, strlen(text), &limits, out, err);
}

/* Parse and expect `want`; on success the document is returned (else NULL). */
static sp_ome *expect(const char *text, sp_status want, const char *msg_part) {
    sp_ome *ome = NULL;
    sp_err err = {0};
    sp_status st = parse(text, &ome, &err);
    CHECK_EQ_INT(st, want);
    if (st != want) {
        fprintf(stderr, "  input: %.200s\n  message: %s\n", text, err.msg);
    }
    if (st != SP_OK) {
        CHECK(ome == NULL);
        CHECK(err.msg[0] != '\0');
        if (msg_part != NULL && strstr(err.msg, msg_part) == NULL) {
            fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", err.msg, msg_part);
            CHECK(0);
        }
    }
    return ome;
}

static bool close_to(double a, double b) {
    return fabs(a - b) <= 1e-12 * fabs(b);
}

static void test_basic(void) {
    const char *doc =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<!-- a comment -->\n"
        "<OME xmlns=\"" NS "\" UUID=\"urn:uuid:AAAA\">\n"
        " <Instrument ID=\"Instrument:0\">\n"
        "  <Objective ID=\"Objective:0:0\" NominalMagnification=\"40.0\"/>\n"
        "  <Objective ID=\"Objective:0:1\" NominalMagnification=\"20\"/>\n"
        " </Instrument>\n"
        " <Image ID=\"Image:0\" Name=\"slide\">\n"
        "  <InstrumentRef ID=\"Instrument:0\"/>\n"
        "  <ObjectiveSettings ID=\"Objective:0:1\"/>\n"
        "  <Pixels ID=\"Pixels:0\" DimensionOrder=\"XYCZT\" Type=\"uint8\" SizeX=\"1000\"\n"
        "          SizeY=\"500\" SizeZ=\"1\" SizeC=\"3\" SizeT=\"1\" Interleaved=\"true\"\n"
        "          PhysicalSizeX=\"0.25\" PhysicalSizeY=\"0.5\" PhysicalSizeYUnit=\"nm\">\n"
        "   <Channel ID=\"Channel:0:0\" Name=\"RGB\" SamplesPerPixel=\"3\" Color=\"-1\"/>\n"
        "   <TiffData IFD=\"0\" PlaneCount=\"1\">\n"
        "    <UUID FileName=\"slide.ome.tif\"> urn:uuid:AAAA </UUID>\n"
        "   </TiffData>\n"
        "  </Pixels>\n"
        " </Image>\n"
        " <Image ID=\"Image:1\" Name=\"macro image\"><Pixels SizeX=\"10\" SizeY=\"20\" "
        "SizeZ=\"1\" SizeC=\"1\" SizeT=\"1\" DimensionOrder=\"XYZCT\" Type=\"uint16\"/></Image>\n"
        " <StructuredAnnotations><XMLAnnotation><Value><Image Name=\"not an image\"/>"
        "</Value></XMLAnnotation></StructuredAnnotations>\n"
        "</OME>\n";
    sp_ome *ome = expect(doc, SP_OK, NULL);
    if (ome == NULL) {
        return;
    }
    CHECK(ome->uuid && strcmp(ome->uuid, "urn:uuid:AAAA") == 0);
    CHECK(!ome->binary_only);
    CHECK_EQ_INT(ome->n_images, 2);
    const sp_ome_image *im = &ome->images[0];
    CHECK(im->has_pixels);
    CHECK(strcmp(im->name, "slide") == 0 && strcmp(im->id, "Image:0") == 0);
    CHECK_EQ_INT(im->size_x, 1000);
    CHECK_EQ_INT(im->size_y, 500);
    CHECK_EQ_INT(im->size_z, 1);
    CHECK_EQ_INT(im->size_c, 3);
    CHECK_EQ_INT(im->size_time, 1);
    CHECK(strcmp(im->dimension_order, "XYCZT") == 0);
    CHECK(strcmp(im->type, "uint8") == 0);
    CHECK(im->interleaved);
    CHECK(close_to(im->physical_size_x, 0.25));
    CHECK(close_to(im->physical_size_y, 0.5e-3));
    CHECK_EQ_INT(im->n_channels, 1);
    CHECK(strcmp(im->channels[0].name, "RGB") == 0);
    CHECK_EQ_INT(im->channels[0].samples_per_pixel, 3);
    CHECK(im->channels[0].has_color && im->channels[0].color == -1);
    CHECK_EQ_INT(sp_ome_image_channel_planes(im), 1);
    CHECK_EQ_INT(sp_ome_image_planes(im), 1);
    CHECK_EQ_INT(im->n_tiffdata, 1);
    CHECK(im->tiffdata[0].has_ifd && im->tiffdata[0].has_plane_count);
    CHECK(strcmp(im->tiffdata[0].uuid, "urn:uuid:AAAA") == 0);
    CHECK(strcmp(im->tiffdata[0].file_name, "slide.ome.tif") == 0);
    CHECK(close_to(im->nominal_magnification, 20));
    const sp_ome_image *macro = &ome->images[1];
    CHECK(strcmp(macro->name, "macro image") == 0);
    CHECK_EQ_INT(macro->size_y, 20);
    CHECK(macro->nominal_magnification == 0);
    CHECK(macro->physical_size_x == 0);
    CHECK_EQ_INT(macro->n_tiffdata, 0);
    sp_err err = {0};
    CHECK_EQ_INT(sp_ome_check_single_file(ome, im, "renamed.tif", &err), SP_OK);
    sp_ome_free(ome);
    sp_ome_free(NULL);
}

static void test_units(void) {
    struct {
        const char *unit;
        double factor; /* 0: not a length */
    } cases[] = {
        {NULL, 1},     {"\xC2\xB5m", 1},   {"\xCE\xBCm", 1},
        {"um", 1},     {"nm", 1e-3},       {"pm", 1e-6},
        {"mm", 1e3},   {"cm", 1e4},        {"dm", 1e5},
        {"m", 1e6},    {"\xC3\x85", 1e-4}, {"\xE2\x84\xAB", 1e-4},
        {"in", 25400}, {"pixel", 0},       {"reference frame", 0},
        {"", 0},       {"MM", 0},          {"km", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double um = -1;
        bool ok = sp_ome_length_to_microns(2.5, cases[i].unit, &um);
        CHECK_EQ_INT(ok, cases[i].factor != 0);
        if (ok) {
            CHECK(close_to(um, 2.5 * cases[i].factor));
        }
    }
    /* Through the parser: a unit in the attribute, a bad or non-positive size is left out. */
    char doc[1024];
    const char *pairs[][3] = {
        {"250", "nm", "0.25"},     {"0.001", "mm", "1"},      {"2.5", "\xC3\x85", "0.00025"},
        {"1e-6", "m", "1"},        {"0.5", "cm", "5000"},     {"3", "pixel", "0"},
        {"-1", "\xC2\xB5m", "0"},  {"INF", "\xC2\xB5m", "0"}, {"0x10", "\xC2\xB5m", "0"},
        {"abc", "\xC2\xB5m", "0"}, {"0", "\xC2\xB5m", "0"},   {" 0.75 ", "\xC2\xB5m", "0.75"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        snprintf(
            doc, sizeof doc,
            "<OME xmlns=\"" NS "\"><Image><Pixels SizeX=\"1\" SizeY=\"1\" "
            "PhysicalSizeX=\"%s\" PhysicalSizeXUnit=\"%s\" PhysicalSizeY=\"1\"/></Image></OME>",
            pairs[i][0], pairs[i][1]);
        sp_ome *ome = expect(doc, SP_OK, NULL);
        if (ome != NULL) {
            double want = strtod(pairs[i][2], NULL);
            CHECK(want == 0 ? ome->images[0].physical_size_x == 0
                            : close_to(ome->images[0].physical_size_x, want));
            CHECK(close_to(ome->images[0].physical_size_y, 1));
            /* Defaults: SizeZ, SizeC, SizeT 1, XYZCT. */
            CHECK_EQ_INT(sp_ome_image_planes(&ome->images[0]), 1);
            CHECK(strcmp(ome->images[0].dimension_order, "XYZCT") == 0);
        }
        sp_ome_free(ome);
    }
}

static sp_ome *image_doc(const char *order, int z, int c, int t, const char *inner) {
    char doc[8192];
    snprintf(doc, sizeof doc,
             "<OME xmlns=\"" NS
             "\"><Image ID=\"Image:0\"><Pixels DimensionOrder=\"%s\" SizeX=\"4\" "
             "SizeY=\"4\" SizeZ=\"%d\" SizeC=\"%d\" SizeT=\"%d\" Type=\"uint8\">%s</Pixels>"
             "</Image></OME>",
             order, z, c, t, inner);
    return expect(doc, SP_OK, NULL);
}

static uint64_t ifd_of(const sp_ome_image *im, uint64_t z, uint64_t c, uint64_t t, uint64_t base,
                       bool *covered) {
    uint64_t ifd = 0;
    const sp_ome_tiffdata *td = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(sp_ome_plane_ifd(im, z, c, t, base, &ifd, &td, &err), SP_OK);
    if (covered != NULL) {
        *covered = td != NULL;
    }
    return ifd;
}

static void test_dimension_order(void) {
    /* Z=2, C=3, T=4: the plane index is the first varying fastest. */
    static const char *const orders[] = {"XYZCT", "XYZTC", "XYCTZ", "XYCZT", "XYTCZ", "XYTZC"};
    for (size_t o = 0; o < 6; o++) {
        sp_ome *ome = image_doc(orders[o], 2, 3, 4, "");
        if (ome == NULL) {
            continue;
        }
        const sp_ome_image *im = &ome->images[0];
        CHECK_EQ_INT(sp_ome_image_planes(im), 24);
        bool seen[24] = {false};
        for (uint64_t z = 0; z < 2; z++) {
            for (uint64_t c = 0; c < 3; c++) {
                for (uint64_t t = 0; t < 4; t++) {
                    uint64_t size[3] = {2, 3, 4}, v[3] = {z, c, t}, want = 0;
                    for (int i = 4; i >= 2; i--) {
                        int d = orders[o][i] == 'Z' ? 0 : orders[o][i] == 'C' ? 1 : 2;
                        want = want * size[d] + v[d];
                    }
                    CHECK_EQ_INT(sp_ome_plane_index(im, z, c, t), want);
                    bool covered = true;
                    /* No TiffData: planes in consecutive IFDs from the base. */
                    CHECK_EQ_INT(ifd_of(im, z, c, t, 7, &covered), 7 + want);
                    CHECK(!covered);
                    CHECK(want < 24 && !seen[want]);
                    if (want < 24) {
                        seen[want] = true;
                    }
                }
            }
        }
        /* Outside the image is an argument error. */
        uint64_t ifd;
        const sp_ome_tiffdata *td;
        sp_err err = {0};
        CHECK_EQ_INT(sp_ome_plane_ifd(im, 2, 0, 0, 0, &ifd, &td, &err), SP_E_INVALID_ARG);
        CHECK_EQ_INT(sp_ome_plane_ifd(im, 0, 3, 0, 0, &ifd, &td, &err), SP_E_INVALID_ARG);
        CHECK_EQ_INT(sp_ome_plane_ifd(im, 0, 0, 4, 0, &ifd, &td, &err), SP_E_INVALID_ARG);
        sp_ome_free(ome);
    }
    /* Known values: XYZCT with Z=5, C=3 (the shared multi-channel-z-series file). */
    sp_ome *ome = image_doc("XYZCT", 5, 3, 1, "");
    if (ome != NULL) {
        CHECK_EQ_INT(sp_ome_plane_index(&ome->images[0], 0, 1, 0), 5);
        CHECK_EQ_INT(sp_ome_plane_index(&ome->images[0], 4, 2, 0), 14);
    }
    sp_ome_free(ome);
    ome = image_doc("XYCZT", 5, 3, 1, "");
    if (ome != NULL) {
        CHECK_EQ_INT(sp_ome_plane_index(&ome->images[0], 0, 1, 0), 1);
        CHECK_EQ_INT(sp_ome_plane_index(&ome->images[0], 1, 0, 0), 3);
    }
    sp_ome_free(ome);
}

static void test_tiffdata(void) {
    bool covered;
    /* One TiffData without attributes: every plane, from IFD 0, in DimensionOrder. */
    sp_ome *ome = image_doc("XYZCT", 2, 2, 1, "<TiffData/>");
    if (ome != NULL) {
        const sp_ome_image *im = &ome->images[0];
        CHECK_EQ_INT(ifd_of(im, 0, 0, 0, 99, &covered), 0);
        CHECK(covered);
        CHECK_EQ_INT(ifd_of(im, 1, 1, 0, 99, &covered), 3);
        CHECK(covered);
    }
    sp_ome_free(ome);
    /* IFD alone: PlaneCount defaults to 1; uncovered planes fall back to the base. */
    ome = image_doc("XYZCT", 2, 1, 1, "<TiffData IFD=\"5\"/>");
    if (ome != NULL) {
        CHECK_EQ_INT(ifd_of(&ome->images[0], 0, 0, 0, 0, &covered), 5);
        CHECK(covered);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 1, 0, 0, 0, &covered), 1);
        CHECK(!covered);
    }
    sp_ome_free(ome);
    /* IFD and PlaneCount. */
    ome = image_doc("XYCZT", 2, 2, 1, "<TiffData IFD=\"3\" PlaneCount=\"4\"/>");
    if (ome != NULL) {
        CHECK_EQ_INT(ifd_of(&ome->images[0], 0, 1, 0, 0, NULL), 4);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 1, 0, 0, 0, NULL), 5);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 1, 1, 0, 0, NULL), 6);
    }
    sp_ome_free(ome);
    /* One TiffData per plane, stored in an order other than DimensionOrder. */
    ome = image_doc("XYZCT", 2, 2, 1,
                    "<TiffData FirstZ=\"1\" FirstC=\"1\" IFD=\"0\" PlaneCount=\"1\"/>"
                    "<TiffData FirstZ=\"0\" FirstC=\"1\" IFD=\"1\" PlaneCount=\"1\"/>"
                    "<TiffData FirstZ=\"1\" FirstC=\"0\" IFD=\"2\" PlaneCount=\"1\"/>"
                    "<TiffData FirstZ=\"0\" FirstC=\"0\" IFD=\"3\" PlaneCount=\"1\"/>");
    if (ome != NULL) {
        CHECK_EQ_INT(ome->images[0].n_tiffdata, 4);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 0, 0, 0, 0, NULL), 3);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 1, 0, 0, 0, NULL), 2);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 0, 1, 0, 0, NULL), 1);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 1, 1, 0, 0, NULL), 0);
    }
    sp_ome_free(ome);
    /* A start with a run: FirstC=1 and PlaneCount 2 covers (z0,c1) and (z1,c1) in XYZCT. */
    ome = image_doc("XYZCT", 2, 2, 1, "<TiffData FirstC=\"1\" IFD=\"10\" PlaneCount=\"2\"/>");
    if (ome != NULL) {
        CHECK_EQ_INT(ifd_of(&ome->images[0], 0, 1, 0, 0, &covered), 10);
        CHECK(covered);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 1, 1, 0, 0, &covered), 11);
        CHECK(covered);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 0, 0, 0, 0, &covered), 0);
        CHECK(!covered);
    }
    sp_ome_free(ome);
    /* PlaneCount 0 covers nothing; a start outside the image covers nothing. */
    ome = image_doc("XYZCT", 2, 1, 1,
                    "<TiffData IFD=\"8\" PlaneCount=\"0\"/><TiffData FirstZ=\"2\" IFD=\"9\"/>");
    if (ome != NULL) {
        CHECK_EQ_INT(ifd_of(&ome->images[0], 0, 0, 0, 4, &covered), 4);
        CHECK(!covered);
    }
    sp_ome_free(ome);
    /* The first covering TiffData wins. */
    ome = image_doc("XYZCT", 1, 1, 1, "<TiffData IFD=\"2\"/><TiffData IFD=\"3\"/>");
    if (ome != NULL) {
        CHECK_EQ_INT(ifd_of(&ome->images[0], 0, 0, 0, 0, NULL), 2);
    }
    sp_ome_free(ome);
    /* RGB channel planes: SizeC=3 as one 3-sample Channel is one plane per Z. */
    ome = image_doc("XYCZT", 2, 3, 1, "<Channel SamplesPerPixel=\"3\"/><TiffData/>");
    if (ome != NULL) {
        CHECK_EQ_INT(sp_ome_image_channel_planes(&ome->images[0]), 1);
        CHECK_EQ_INT(sp_ome_image_planes(&ome->images[0]), 2);
        CHECK_EQ_INT(ifd_of(&ome->images[0], 1, 0, 0, 0, NULL), 1);
    }
    sp_ome_free(ome);
    /* Channels whose samples do not add up to SizeC: SizeC planes. */
    ome = image_doc("XYCZT", 1, 3, 1,
                    "<Channel SamplesPerPixel=\"2\"/><Channel/>"
                    "<Channel/><Channel/>");
    if (ome != NULL) {
        CHECK_EQ_INT(sp_ome_image_channel_planes(&ome->images[0]), 3);
    }
    sp_ome_free(ome);
    /* Bad numbers in TiffData are corrupt. */
    expect("<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\"><TiffData IFD=\"-1\"/></Pixels></Image>"
           "</OME>",
           SP_E_CORRUPT, "IFD");
    expect("<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\"><TiffData PlaneCount=\"1.5\"/></Pixels>"
           "</Image></OME>",
           SP_E_CORRUPT, "PlaneCount");
    expect("<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\"><TiffData FirstZ=\"3000000000\"/>"
           "</Pixels></Image></OME>",
           SP_E_CORRUPT, "FirstZ");
}

static void test_single_file(void) {
    const char *fmt =
        "<OME xmlns=\"" NS
        "\" %s><Image ID=\"Image:0\"><Pixels SizeX=\"4\" SizeY=\"4\" SizeC=\"2\">"
        "<TiffData FirstC=\"0\" IFD=\"0\"><UUID FileName=\"a.ome.tif\">urn:uuid:A</UUID></TiffData>"
        "<TiffData FirstC=\"1\" IFD=\"0\"><UUID %s>%s</UUID></TiffData>"
        "</Pixels></Image></OME>";
    struct {
        const char *root, *file_attr, *uuid, *file;
        sp_status want;
    } cases[] = {
        /* Different UUID and file name: planes in another file. */
        {"UUID=\"urn:uuid:A\"", "FileName=\"b.ome.tif\"", "urn:uuid:B", "a.ome.tif",
         SP_E_UNSUPPORTED},
        /* Same UUID (case-insensitively) although the file was renamed. */
        {"UUID=\"urn:uuid:a\"", "FileName=\"a.ome.tif\"", "urn:uuid:A", "renamed.tif", SP_OK},
        /* Different UUID but our own file name. */
        {"UUID=\"urn:uuid:A\"", "FileName=\"dir/a.ome.tif\"", "urn:uuid:B", "a.ome.tif", SP_OK},
        /* No root UUID: the file name decides. */
        {"", "FileName=\"b.ome.tif\"", "urn:uuid:B", "a.ome.tif", SP_E_UNSUPPORTED},
        /* A UUID but no root UUID and no file name: no evidence of another file. */
        {"", "", "urn:uuid:B", "a.ome.tif", SP_OK},
        /* A UUID element without text or file name says nothing: local. */
        {"UUID=\"urn:uuid:A\"", "", "", "x.tif", SP_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char doc[2048];
        snprintf(doc, sizeof doc, fmt, cases[i].root, cases[i].file_attr, cases[i].uuid);
        sp_ome *ome = expect(doc, SP_OK, NULL);
        if (ome == NULL) {
            continue;
        }
        sp_err err = {0};
        sp_status st = sp_ome_check_single_file(ome, &ome->images[0], cases[i].file, &err);
        CHECK_EQ_INT(st, cases[i].want);
        if (st == SP_E_UNSUPPORTED) {
            CHECK(strstr(err.msg, "multi-file OME-TIFF") != NULL);
        }
        sp_ome_free(ome);
    }
    sp_ome *ome = expect("<OME xmlns=\"" NS "\"><BinaryOnly MetadataFile=\"x.companion.ome\" "
                         "UUID=\"urn:uuid:X\"/></OME>",
                         SP_OK, NULL);
    if (ome != NULL) {
        sp_ome_image none = {0};
        sp_err err = {0};
        CHECK(ome->binary_only);
        CHECK_EQ_INT(ome->n_images, 0);
        CHECK_EQ_INT(sp_ome_check_single_file(ome, &none, "x.ome.tif", &err), SP_E_UNSUPPORTED);
        CHECK(strstr(err.msg, "multi-file OME-TIFF") != NULL);
    }
    sp_ome_free(ome);
}

static void test_xml_constructs(void) {
    /* Entities and character references, both quote kinds, whitespace normalisation. */
    sp_ome *ome = expect(
        "\xEF\xBB\xBF<?xml version='1.0'?><?pi stuff?><!-- c --><OME xmlns='" NS "'>"
        "<Image Name='a&lt;b&gt;c&amp;d&apos;e&quot;f&#65;&#x42;&#xb5;&#x10FFFF;' ID=\"x'y\">"
        "<![CDATA[ <Pixels SizeX='oops'/> ]]><!-- <Pixels/> -->"
        "<Pixels SizeX = \"7\"\tSizeY\n=\n'8' Type=\"a\tb\r\nc\"/></Image></OME>  \n<!-- end -->",
        SP_OK, NULL);
    if (ome != NULL) {
        const sp_ome_image *im = &ome->images[0];
        CHECK(strcmp(im->name, "a<b>c&d'e\"fAB\xC2\xB5\xF4\x8F\xBF\xBF") == 0);
        CHECK(strcmp(im->id, "x'y") == 0);
        CHECK_EQ_INT(im->size_x, 7);
        CHECK_EQ_INT(im->size_y, 8);
        CHECK(strcmp(im->type, "a b c") == 0);
    }
    sp_ome_free(ome);
    /* Namespace prefixes are ignored: elements and attributes match by local name. */
    ome = expect("<ome:OME xmlns:ome=\"" NS "\"><ome:Image ome:Name=\"p\"><ome:Pixels "
                 "ome:SizeX=\"3\" SizeY=\"2\"><ome:TiffData IFD=\"4\"><ome:UUID>u</ome:UUID>"
                 "</ome:TiffData></ome:Pixels></ome:Image></ome:OME>",
                 SP_OK, NULL);
    if (ome != NULL) {
        CHECK(strcmp(ome->images[0].name, "p") == 0);
        CHECK_EQ_INT(ome->images[0].size_x, 3);
        CHECK_EQ_INT(ome->images[0].tiffdata[0].ifd, 4);
        CHECK(strcmp(ome->images[0].tiffdata[0].uuid, "u") == 0);
    }
    sp_ome_free(ome);
    /* UUID text split by a comment and CDATA, with references. */
    ome = expect("<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\"><TiffData><UUID>ur<!--x-->n:"
                 "<![CDATA[uu]]>id&#58;Z</UUID></TiffData></Pixels></Image></OME>",
                 SP_OK, NULL);
    if (ome != NULL) {
        CHECK(strcmp(ome->images[0].tiffdata[0].uuid, "urn:uuid:Z") == 0);
    }
    sp_ome_free(ome);
    /* Only the first Pixels of an Image counts; Image outside the root's children is ignored. */
    ome = expect("<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\"/><Pixels SizeX=\"2\" SizeY=\"2\"/>"
                 "</Image><Other><Image/></Other></OME>",
                 SP_OK, NULL);
    if (ome != NULL) {
        CHECK_EQ_INT(ome->n_images, 1);
        CHECK_EQ_INT(ome->images[0].size_x, 1);
    }
    sp_ome_free(ome);
    /* An Image without Pixels is kept, marked. */
    ome = expect("<OME><Image Name=\"n\"/></OME>", SP_OK, NULL);
    if (ome != NULL) {
        CHECK(!ome->images[0].has_pixels);
        CHECK_EQ_INT(sp_ome_image_planes(&ome->images[0]), 0);
    }
    sp_ome_free(ome);
}

static void test_malformed(void) {
    struct {
        const char *doc;
        sp_status want;
        const char *msg;
    } cases[] = {
        {"", SP_E_CORRUPT, "no root"},
        {"   ", SP_E_CORRUPT, "no root"},
        {"<?xml version=\"1.0\"?>", SP_E_CORRUPT, "no root"},
        {"<OME>", SP_E_CORRUPT, "truncated"},
        {"<OME></Image>", SP_E_CORRUPT, "does not match"},
        {"<OME></OME></OME>", SP_E_CORRUPT, "without a start tag"},
        {"<OME/><OME/>", SP_E_CORRUPT, "second root"},
        {"<OME/>text", SP_E_CORRUPT, "outside the root"},
        {"text<OME/>", SP_E_CORRUPT, "outside the root"},
        {"<Image/>", SP_E_CORRUPT, "not <OME>"},
        {"<OME a=b/>", SP_E_CORRUPT, "without quotes"},
        {"<OME a=\"1\"b=\"2\"/>", SP_E_CORRUPT, "whitespace"},
        {"<OME a/>", SP_E_CORRUPT, "'='"},
        {"<OME a=\"<\"/>", SP_E_CORRUPT, "'<'"},
        {"<OME a=\"&\"/>", SP_E_CORRUPT, "reference"},
        {"<OME a=\"&amp\"/>", SP_E_CORRUPT, "reference"},
        {"<OME a=\"&nbsp;\"/>", SP_E_CORRUPT, "unknown entity"},
        {"<OME a=\"&#;\"/>", SP_E_CORRUPT, "empty"},
        {"<OME a=\"&#x;\"/>", SP_E_CORRUPT, "empty"},
        {"<OME a=\"&#0;\"/>", SP_E_CORRUPT, "does not allow"},
        {"<OME a=\"&#xD800;\"/>", SP_E_CORRUPT, "does not allow"},
        {"<OME a=\"&#x110000;\"/>", SP_E_CORRUPT, "U+10FFFF"},
        {"<OME a=\"&#99999999999999;\"/>", SP_E_CORRUPT, NULL},
        {"<OME a=\"&#12a;\"/>", SP_E_CORRUPT, "bad digit"},
        {"<OME a=\"\x01\"/>", SP_E_CORRUPT, "control"},
        {"<OME>\x02</OME>", SP_E_CORRUPT, "control"},
        {"<OME>&bogus;</OME>", SP_E_CORRUPT, "unknown entity"},
        {"<OME/ >", SP_E_CORRUPT, "'>'"},
        {"<1OME/>", SP_E_CORRUPT, "name"},
        {"< OME/>", SP_E_CORRUPT, "name"},
        {"<OME></ OME>", SP_E_CORRUPT, "name"},
        {"<OME></OME x>", SP_E_CORRUPT, "'>'"},
        {"<OME><!-- unterminated </OME>", SP_E_CORRUPT, "truncated"},
        {"<OME><![CDATA[ unterminated </OME>", SP_E_CORRUPT, "truncated"},
        {"<![CDATA[x]]><OME/>", SP_E_CORRUPT, "CDATA"},
        {"<?xml unterminated", SP_E_CORRUPT, "truncated"},
        {"<OME><!ELEMENT x></OME>", SP_E_CORRUPT, "declaration"},
        {"<!DOCTYPE OME [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><OME>&e;</OME>",
         SP_E_UNSUPPORTED, "DOCTYPE"},
        {"\xFE\xFF\0<\0O", SP_E_UNSUPPORTED, "UTF-16"},
        {"\xFF\xFE<\0O\0", SP_E_UNSUPPORTED, "UTF-16"},
        /* Numbers that drive structure are checked. */
        {"<OME><Image><Pixels SizeY=\"1\"/></Image></OME>", SP_E_CORRUPT, "without SizeX"},
        {"<OME><Image><Pixels SizeX=\"abc\" SizeY=\"1\"/></Image></OME>", SP_E_CORRUPT, "SizeX"},
        {"<OME><Image><Pixels SizeX=\"0\" SizeY=\"1\"/></Image></OME>", SP_E_CORRUPT, "SizeX"},
        {"<OME><Image><Pixels SizeX=\"-5\" SizeY=\"1\"/></Image></OME>", SP_E_CORRUPT, "SizeX"},
        {"<OME><Image><Pixels SizeX=\"2147483648\" SizeY=\"1\"/></Image></OME>", SP_E_CORRUPT,
         "SizeX"},
        {"<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\" SizeZ=\"\"/></Image></OME>", SP_E_CORRUPT,
         "SizeZ"},
        {"<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\" SizeC=\"1 2\"/></Image></OME>", SP_E_CORRUPT,
         "SizeC"},
        {"<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\" DimensionOrder=\"XYZZT\"/></Image></OME>",
         SP_E_CORRUPT, "DimensionOrder"},
        {"<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\"><Channel SamplesPerPixel=\"0\"/></Pixels>"
         "</Image></OME>",
         SP_E_CORRUPT, "SamplesPerPixel"},
        {"<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\"><Channel Color=\"2147483648\"/></Pixels>"
         "</Image></OME>",
         SP_E_CORRUPT, "Color"},
        {"<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\" SizeZ=\"2147483647\" SizeC=\"2147483647\" "
         "SizeT=\"2147483647\"/></Image></OME>",
         SP_E_CORRUPT, "64 bits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sp_ome *ome = NULL;
        sp_err err = {0};
        sp_limits limits;
        sp_limits_default(&limits);
        /* Lengths by strlen, except the UTF-16 cases holding NULs. */
        size_t len = strlen(cases[i].doc);
        if ((unsigned char)cases[i].doc[0] >= 0xFE) {
            len = 6;
        }
        sp_status st = sp_ome_parse(cases[i].doc, len, &limits, &ome, &err);
        CHECK_EQ_INT(st, cases[i].want);
        CHECK(ome == NULL);
        if (st != cases[i].want || (cases[i].msg && strstr(err.msg, cases[i].msg) == NULL)) {
            fprintf(stderr, "  case %zu: %s -> %d \"%s\"\n", i, cases[i].doc, st, err.msg);
            CHECK(0);
        }
        sp_ome_free(ome);
    }
    /* Valid edge cases of the same constructs. */
    static const char *const fine[] = {
        "<OME/>",
        "<OME></OME >",
        "<OME\n/>",
        "<OME a=\"\" b=''/>",
        "<OME>&#x9;&#10;</OME>",
        "<OME><x:y:z/></OME>",
        "<OME><?pi <OME/> ?></OME>",
        "<OME><![CDATA[]]></OME>",
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        sp_ome_free(expect(fine[i], SP_OK, NULL));
    }
}

/* Every proper prefix of a valid document fails cleanly (no prefix is well-formed). */
static void test_truncation(void) {
    const char *doc =
        "<?xml version=\"1.0\"?><OME xmlns=\"" NS "\" UUID=\"urn:uuid:1\"><Image ID=\"Image:0\" "
        "Name=\"a&amp;b\"><Pixels SizeX=\"4\" SizeY=\"4\" SizeC=\"1\" DimensionOrder=\"XYZCT\">"
        "<Channel Name=\"c\"/><TiffData IFD=\"0\"><UUID FileName=\"f\">urn:uuid:1</UUID>"
        "</TiffData><![CDATA[x]]></Pixels></Image><!-- c --></OME>";
    size_t n = strlen(doc);
    sp_limits limits;
    sp_limits_default(&limits);
    int clean = 0;
    for (size_t len = 0; len < n; len++) {
        char *copy = malloc(len ? len : 1); /* exact size: ASan sees any overread */
        memcpy(copy, doc, len);
        sp_ome *ome = NULL;
        sp_err err = {0};
        sp_status st = sp_ome_parse(copy, len, &limits, &ome, &err);
        clean += st == SP_E_CORRUPT && ome == NULL && err.msg[0] != '\0';
        if (st != SP_E_CORRUPT) {
            fprintf(stderr, "  prefix of %zu bytes: status %d\n", len, st);
        }
        sp_ome_free(ome);
        free(copy);
    }
    CHECK_EQ_INT(clean, n);
    sp_ome_free(expect(doc, SP_OK, NULL));
}

static char *repeat(const char *head, const char *unit, size_t times, const char *tail) {
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * times + tl + 1);
    memcpy(s, head, hl);
    for (size_t i = 0; i < times; i++) {
        memcpy(s + hl + i * ul, unit, ul);
    }
    memcpy(s + hl + ul * times, tail, tl + 1);
    return s;
}

static void test_limits(void) {
    /* Nesting: 255 levels under the root are fine, 300 are not. */
    char *open = repeat("<OME>", "<a>", 255, "");
    char *doc = repeat(open, "</a>", 255, "</OME>");
    sp_ome_free(expect(doc, SP_OK, NULL));
    free(open);
    free(doc);
    open = repeat("<OME>", "<a>", 300, "");
    doc = repeat(open, "</a>", 300, "</OME>");
    expect(doc, SP_E_LIMIT, "deeper");
    free(open);
    free(doc);
    /* Deep nesting that is also unterminated. */
    doc = repeat("<OME>", "<a><b/>", 100000, "");
    expect(doc, SP_E_LIMIT, "deeper");
    free(doc);
    /* A 2 MiB attribute value, and many attribute values adding up past the bound. */
    doc = repeat("<OME a=\"", "x", 2u << 20, "\"/>");
    expect(doc, SP_E_LIMIT, "larger than");
    free(doc);
    char *unit = repeat(" a=\"", "&amp;", 3000, "\"");
    doc = repeat("<OME", unit, 400, "/>");
    expect(doc, SP_E_LIMIT, "larger than");
    free(unit);
    free(doc);
    /* A huge text node is only scanned, never stored; inside a UUID it is bounded. */
    doc = repeat("<OME>", "text ", 1u << 20, "</OME>");
    sp_ome_free(expect(doc, SP_OK, NULL));
    free(doc);
    doc = repeat("<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\"><TiffData><UUID>", "u", 300,
                 "</UUID></TiffData></Pixels></Image></OME>");
    expect(doc, SP_E_LIMIT, "UUID");
    free(doc);
    /* Too many attributes; a huge name. */
    doc = repeat("<OME", " a=\"1\"", SP_OME_XML_MAX_ATTRS + 1, "/>");
    expect(doc, SP_E_LIMIT, "attributes");
    free(doc);
    doc = repeat("<OME", "x", SP_OME_XML_MAX_NAME + 10, "/>");
    expect(doc, SP_E_LIMIT, "name");
    free(doc);
    /* Too many Images, Channels. */
    doc = repeat("<OME>", "<Image/>", SP_OME_MAX_IMAGES + 1, "</OME>");
    expect(doc, SP_E_LIMIT, "Images");
    free(doc);
    doc = repeat("<OME><Image><Pixels SizeX=\"1\" SizeY=\"1\">", "<Channel/>",
                 SP_OME_MAX_CHANNELS + 1, "</Pixels></Image></OME>");
    expect(doc, SP_E_LIMIT, "Channels");
    free(doc);
    /* The input size against SP_LIMIT_MAX_METADATA. */
    sp_limits limits;
    sp_limits_default(&limits);
    limits.value[SP_LIMIT_MAX_METADATA] = 8;
    sp_ome *ome = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(sp_ome_parse("<OME></OME>", 11, &limits, &ome, &err), SP_E_LIMIT);
    CHECK(ome == NULL && strstr(err.msg, "metadata limit") != NULL);
}

/* Random byte mutations of a valid document: any status, but no crash, leak or overread (the
 * sanitizer build checks) and a message on every failure. */
static void test_mutations(void) {
    const char *doc =
        "<?xml version=\"1.0\"?><OME xmlns=\"" NS "\" UUID=\"urn:uuid:1\"><Instrument>"
        "<Objective ID=\"O\" NominalMagnification=\"20\"/></Instrument><Image ID=\"Image:0\" "
        "Name=\"a&amp;b\"><ObjectiveSettings ID=\"O\"/><Pixels SizeX=\"4\" SizeY=\"4\" "
        "SizeZ=\"2\" SizeC=\"3\" DimensionOrder=\"XYCZT\" PhysicalSizeX=\"0.5\"><Channel "
        "Name=\"c\" SamplesPerPixel=\"3\"/><TiffData IFD=\"0\" PlaneCount=\"2\"><UUID "
        "FileName=\"f\">urn:uuid:1</UUID></TiffData><![CDATA[x]]></Pixels></Image>"
        "<!-- c --></OME>";
    size_t n = strlen(doc);
    static const char alphabet[] = "<>/=\"'&;#x!?-[]: aZ09\t\xC2\xB5";
    uint64_t rng = 20250601;
    sp_limits limits;
    sp_limits_default(&limits);
    int ok = 0, failed_cleanly = 0;
    for (int iter = 0; iter < 20000; iter++) {
        char *copy = malloc(n);
        memcpy(copy, doc, n);
        int flips = 1 + (int)((rng >> 33) % 4);
        for (int f = 0; f < flips; f++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)((rng >> 33) % n);
            copy[at] =
                (rng >> 20) & 1 ? alphabet[(rng >> 40) % (sizeof alphabet - 1)] : (char)(rng >> 48);
        }
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = (rng >> 33) % 8 == 0 ? (size_t)((rng >> 40) % n) : n;
        sp_ome *ome = NULL;
        sp_err err = {0};
        sp_status st = sp_ome_parse(copy, len, &limits, &ome, &err);
        if (st == SP_OK) {
            ok++;
            for (uint32_t i = 0; i < ome->n_images; i++) {
                const sp_ome_image *im = &ome->images[i];
                uint64_t ifd;
                const sp_ome_tiffdata *td;
                sp_err e2 = {0};
                if (im->has_pixels) {
                    sp_ome_plane_ifd(im, 0, 0, 0, 0, &ifd, &td, &e2);
                    sp_ome_check_single_file(ome, im, "f", &e2);
                }
            }
        } else {
            failed_cleanly += ome == NULL && err.msg[0] != '\0';
        }
        sp_ome_free(ome);
        free(copy);
    }
    CHECK_EQ_INT(ok + failed_cleanly, 20000);
    CHECK(ok > 0 && failed_cleanly > 0);
}

void unit_run(void) {
    test_basic();
    test_units();
    test_dimension_order();
    test_tiffdata();
    test_single_file();
    test_xml_constructs();
    test_malformed();
    test_truncation();
    test_limits();
    test_mutations();
}

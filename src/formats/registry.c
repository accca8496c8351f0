/* registry.c — the list of slide formats, most specific first (a vendor TIFF before generic). */
#include "formats/format.h"

extern const sp_format sp_format_hamamatsu_ndpi;
extern const sp_format sp_format_hamamatsu_vms;
extern const sp_format sp_format_hamamatsu_vmu;
extern const sp_format sp_format_philips_tiff;
extern const sp_format sp_format_leica_scn;
extern const sp_format sp_format_ventana_bif;
extern const sp_format sp_format_aperio;
extern const sp_format sp_format_huron;
extern const sp_format sp_format_ome_tiff;
extern const sp_format sp_format_dicom;
extern const sp_format sp_format_sakura_svslide;
extern const sp_format sp_format_trestle;
extern const sp_format sp_format_ome_zarr;
extern const sp_format sp_format_generic_tiff;
extern const sp_format sp_format_mirax;
extern const sp_format sp_format_zeiss_czi;

const sp_format *const sp_formats[] = {
    &sp_format_hamamatsu_ndpi,
    &sp_format_hamamatsu_vms, /* key files: their first [section] */
    &sp_format_hamamatsu_vmu,
    &sp_format_philips_tiff,
    &sp_format_leica_scn,
    &sp_format_ventana_bif,
    &sp_format_aperio,
    &sp_format_huron, /* after Aperio, as OpenSlide: Aperio with a Huron Make is Aperio */
    &sp_format_ome_tiff,
    &sp_format_dicom,
    &sp_format_sakura_svslide,
    &sp_format_trestle,
    &sp_format_ome_zarr,
    &sp_format_generic_tiff,
    &sp_format_mirax,
    &sp_format_zeiss_czi,
    NULL,
};
